// Command busybox is a small multi-call program providing the BusyBox applets that charts'
// test pods call (wget), so an image named busybox can be built from this repository where no
// registry is reachable. Like BusyBox it runs the applet its name says (/bin/wget) or the one
// named first (busybox wget URL).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"
)

func main() {
	name, args := filepath.Base(os.Args[0]), os.Args[1:]
	if name == "busybox" && len(args) > 0 {
		name, args = args[0], args[1:]
	}
	switch name {
	case "wget":
		os.Exit(wget(args, os.Stdout, os.Stderr))
	default:
		fmt.Fprintf(os.Stderr, "%s: applet not found\n", name)
		os.Exit(127)
	}
}

// wget fetches one URL as BusyBox's wget does: http:// assumed when no scheme is given, the
// body saved under the URL's last path element (index.html for none) or -O's file ("-" is
// stdout), exit 1 with "wget: ..." on a failure or an HTTP error status.
func wget(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("wget", flag.ContinueOnError)
	fs.SetOutput(stderr)
	quiet := fs.Bool("q", false, "quiet")
	out := fs.String("O", "", "save to this file (- for stdout)")
	timeout := fs.Int("T", 0, "network timeout in seconds (0: none)")
	spider := fs.Bool("spider", false, "only check that the URL exists")
	if err := fs.Parse(args); err != nil {
		return 1
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(stderr, "usage: wget [-q] [-O FILE] [-T SEC] [--spider] URL")
		return 1
	}
	if err := fetch(fs.Arg(0), *out, time.Duration(*timeout)*time.Second, *spider, *quiet, stdout, stderr); err != nil {
		fmt.Fprintf(stderr, "wget: %v\n", err)
		return 1
	}
	return 0
}

func fetch(raw, out string, timeout time.Duration, spider, quiet bool, stdout, stderr io.Writer) error {
	if !strings.Contains(raw, "://") {
		raw = "http://" + raw
	}
	u, err := url.Parse(raw)
	if err != nil {
		return err
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("unsupported scheme %q", u.Scheme)
	}
	dialer := &net.Dialer{Timeout: timeout}
	client := &http.Client{Timeout: timeout, Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := dialer.DialContext(ctx, network, addr)
			if err == nil && !quiet {
				fmt.Fprintf(stderr, "Connecting to %s (%s)\n", addr, c.RemoteAddr())
			}
			return c, err
		},
	}}
	method := http.MethodGet
	if spider {
		method = http.MethodHead
	}
	req, err := http.NewRequest(method, u.String(), nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err
		}
		return fmt.Errorf("can't connect to remote host: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 400 {
		return fmt.Errorf("server returned error: %s %s", resp.Proto, resp.Status)
	}
	if spider {
		return nil
	}
	if out == "" {
		out = path.Base(u.Path)
		if out == "/" || out == "." || out == "" {
			out = "index.html"
		}
	}
	var w io.Writer = stdout
	if out != "-" {
		f, err := os.Create(out)
		if err != nil {
			return err
		}
		defer f.Close()
		w = f
		if !quiet {
			fmt.Fprintf(stderr, "saving to '%s'\n", out)
		}
	}
	n, err := io.Copy(w, resp.Body)
	if err != nil {
		return err
	}
	if out != "-" && !quiet {
		fmt.Fprintf(stderr, "'%s' saved (%d bytes)\n", out, n)
	}
	return nil
}
