// Command httpecho is Skiff's test workload: a static HTTP server that tells
// who answered (pod, hostname, IP), with health/readiness endpoints that can
// be made to fail, memory allocation for OOM tests, a UDP echo for Service
// tests and an optional timed exit for restart tests. It also carries a few
// one-shot modes (-version, -probe, -cat, -append, -resolve) so exec and init containers work in a FROM scratch
// image that has no shell, and answers as tar and test when started by those names, for kubectl cp.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// version is set with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	if code, ok := multiCall(filepath.Base(os.Args[0]), os.Args[1:]); ok {
		os.Exit(code)
	}
	var (
		showVersion   = flag.Bool("version", false, "print the version and exit")
		probe         = flag.String("probe", "", "GET this URL, exit 0 on a 2xx/3xx answer, 1 otherwise")
		cat           = flag.String("cat", "", "print this file (- for stdin) and exit")
		write         = flag.String("write", "", "write stdin to this file and exit")
		appendTo      = flag.String("append", "", "FILE=LINE: append LINE to FILE, then exit with -exit-code (init container tests)")
		exitAfter     = flag.Duration("exit-after", envDuration("EXIT_AFTER"), "exit after this long (0: never)")
		exitCode      = flag.Int("exit-code", envInt("EXIT_CODE", 0), "exit code for -exit-after")
		ignoreSigterm = flag.Bool("ignore-sigterm", os.Getenv("IGNORE_SIGTERM") == "1", "ignore SIGTERM (tests of the kill escalation)")
		port          = flag.String("port", envOr("PORT", "8080"), "TCP port for HTTP")
		udpPort       = flag.String("udp-port", envOr("UDP_PORT", ""), "UDP echo port (default: the HTTP port)")
		udpProbe      = flag.String("udp-probe", "", "send \"whoami\" to this UDP host:port, print the answer and who sent it, exit 0 on an answer")
		resolve       = flag.String("resolve", "", "look this name up with Go's resolver (the pod's resolv.conf: search path, ndots), print the answers one a line, exit 0 on an answer")
		resolveType   = flag.String("resolve-type", "A", "-resolve's record type: A (every address), CNAME or SRV (NAME is _port._proto.service)")
		interactive   = flag.Bool("interactive", false, "answer stdin line by line, reporting the terminal and its size (exec tests)")
		burn          = flag.Duration("burn", envDuration("BURN"), "keep one CPU busy this long after the start, then idle (autoscaling tests)")
	)
	flag.Parse()
	switch {
	case *showVersion:
		fmt.Println("httpecho", version)
		return
	case *probe != "":
		os.Exit(runProbe(*probe))
	case *cat != "":
		os.Exit(runCat(*cat))
	case *write != "":
		os.Exit(runWrite(*write))
	case *appendTo != "":
		os.Exit(runAppend(*appendTo, *exitCode))
	case *udpProbe != "":
		os.Exit(runUDPProbe(*udpProbe))
	case *resolve != "":
		os.Exit(runResolve(*resolve, *resolveType))
	case *interactive:
		os.Exit(runInteractive(os.Stdin, os.Stdout))
	}
	if *udpPort == "" {
		*udpPort = *port
	}

	s := newServer()
	ln, err := net.Listen("tcp", ":"+*port)
	if err != nil {
		log.Fatalf("listen tcp: %v", err)
	}
	pc, err := net.ListenPacket("udp", ":"+*udpPort)
	if err != nil {
		log.Fatalf("listen udp: %v", err)
	}
	go udpEcho(pc, s.pod)
	if *burn > 0 {
		go burnCPU(*burn)
	}
	srv := &http.Server{Handler: s.routes(), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Fatalf("serve: %v", err)
		}
	}()
	fmt.Printf("httpecho %s listening on tcp :%s udp :%s pod=%s ip=%s\n", version, *port, *udpPort, s.pod, s.ip)

	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	var timeout <-chan time.Time
	if *exitAfter > 0 {
		timeout = time.After(*exitAfter)
	}
	for {
		select {
		case <-timeout:
			fmt.Printf("exit-after %s: exiting with code %d\n", *exitAfter, *exitCode)
			os.Exit(*exitCode)
		case code := <-s.exit:
			fmt.Printf("exit requested: code %d\n", code)
			os.Exit(code)
		case sig := <-sigs:
			if sig == syscall.SIGTERM && *ignoreSigterm {
				fmt.Println("SIGTERM ignored")
				continue
			}
			fmt.Printf("%s: shutting down\n", sig)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_ = srv.Shutdown(ctx)
			cancel()
			return
		}
	}
}

type server struct {
	pod, hostname, ip string
	healthy, ready    atomic.Bool
	readyAt           time.Time
	exit              chan int

	mu    sync.Mutex
	alloc [][]byte // kept reachable so the memory stays charged to the cgroup
}

func newServer() *server {
	host, _ := os.Hostname()
	s := &server{
		pod:      envOr("POD_NAME", host),
		hostname: host,
		ip:       envOr("POD_IP", firstIP()),
		exit:     make(chan int, 1),
	}
	s.healthy.Store(os.Getenv("HEALTHZ_FAIL") != "1")
	s.ready.Store(os.Getenv("READY_FAIL") != "1")
	s.readyAt = time.Now().Add(envDuration("READY_AFTER"))
	return s
}

func (s *server) routes() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("/", s.handleRoot)
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { check(w, s.healthy.Load()) })
	mux.HandleFunc("/ready", func(w http.ResponseWriter, _ *http.Request) {
		check(w, s.ready.Load() && time.Now().After(s.readyAt))
	})
	// /fail?what=healthz|ready (default both) and /recover flip the probes at runtime.
	mux.HandleFunc("/fail", func(w http.ResponseWriter, r *http.Request) { s.setProbes(w, r, false) })
	mux.HandleFunc("/recover", func(w http.ResponseWriter, r *http.Request) { s.setProbes(w, r, true) })
	mux.HandleFunc("/alloc", s.handleAlloc)
	// /say?line=... writes the line to stdout: container output on demand (attach and logs tests).
	mux.HandleFunc("/say", func(w http.ResponseWriter, r *http.Request) {
		fmt.Println(r.URL.Query().Get("line"))
		fmt.Fprintln(w, "said")
	})
	mux.HandleFunc("/exit", func(w http.ResponseWriter, r *http.Request) {
		code, _ := strconv.Atoi(r.URL.Query().Get("code"))
		fmt.Fprintf(w, "exiting with %d\n", code)
		s.exit <- code
	})
	return mux
}

// Info is the JSON body of "/".
type Info struct {
	Pod      string `json:"pod"`
	Hostname string `json:"hostname"`
	IP       string `json:"ip"`
	Remote   string `json:"remote"`
	Version  string `json:"version"`
}

func (s *server) handleRoot(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(Info{Pod: s.pod, Hostname: s.hostname, IP: s.ip, Remote: r.RemoteAddr, Version: version})
}

func (s *server) setProbes(w http.ResponseWriter, r *http.Request, ok bool) {
	what := r.URL.Query().Get("what")
	if what == "" || what == "healthz" {
		s.healthy.Store(ok)
	}
	if what == "" || what == "ready" {
		s.ready.Store(ok)
	}
	fmt.Fprintf(w, "healthz=%v ready=%v\n", s.healthy.Load(), s.ready.Load())
}

func (s *server) handleAlloc(w http.ResponseWriter, r *http.Request) {
	mb, err := strconv.Atoi(r.URL.Query().Get("mb"))
	if err != nil || mb <= 0 {
		http.Error(w, "mb must be a positive integer", http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for range mb {
		b := make([]byte, 1<<20)
		for i := 0; i < len(b); i += 4096 {
			b[i] = 1 // touch every page so it is really resident
		}
		s.alloc = append(s.alloc, b)
	}
	fmt.Fprintf(w, "allocated %d MiB (total %d MiB)\n", mb, len(s.alloc))
}

func check(w http.ResponseWriter, ok bool) {
	if !ok {
		http.Error(w, "failing", http.StatusServiceUnavailable)
		return
	}
	fmt.Fprintln(w, "ok")
}

// udpEcho echoes datagrams; "whoami" is answered with the pod's name, so a client can tell
// which backend of a Service answered.
func udpEcho(pc net.PacketConn, pod string) {
	buf := make([]byte, 64<<10)
	for {
		n, addr, err := pc.ReadFrom(buf)
		if err != nil {
			return
		}
		reply := buf[:n]
		if string(reply) == "whoami" {
			reply = []byte(pod)
		}
		_, _ = pc.WriteTo(reply, addr)
	}
}

// runUDPProbe prints "<answer> from <sender>": with a Service's ClusterIP the sender must be the
// ClusterIP itself, which proves the reverse translation.
func runUDPProbe(addr string) int {
	raddr, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	conn, err := net.ListenUDP("udp", nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(3 * time.Second))
	if _, err := conn.WriteTo([]byte("whoami"), raddr); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	buf := make([]byte, 1024)
	n, from, err := conn.ReadFrom(buf)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Printf("%s from %s\n", buf[:n], from)
	return 0
}

func runProbe(url string) int {
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer resp.Body.Close()
	_, _ = io.Copy(os.Stdout, resp.Body)
	if resp.StatusCode >= 400 {
		return 1
	}
	return 0
}

func runCat(path string) int {
	var r io.Reader = os.Stdin
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer f.Close()
		r = f
	}
	if _, err := io.Copy(os.Stdout, r); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// runWrite writes stdin to a file (a pod that leaves data in a volume).
func runWrite(path string) int {
	data, err := io.ReadAll(os.Stdin)
	if err == nil {
		err = os.WriteFile(path, data, 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// runAppend appends a line to a file and exits with code: an init container that leaves a
// trace of its turn (or fails after leaving it) in a shared volume.
func runAppend(spec string, code int) int {
	path, line, ok := strings.Cut(spec, "=")
	if !ok {
		fmt.Fprintln(os.Stderr, "-append wants FILE=LINE")
		return 2
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	_, err = fmt.Fprintln(f, line)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return code
}

func firstIP() string {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return ""
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() && n.IP.To4() != nil {
			return n.IP.String()
		}
	}
	return ""
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func envInt(k string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(k)); err == nil {
		return v
	}
	return def
}

func envDuration(k string) time.Duration {
	d, _ := time.ParseDuration(os.Getenv(k))
	return d
}

// burnCPU spins until d has passed, so the container's cgroup shows about one core of usage.
func burnCPU(d time.Duration) {
	end := time.Now().Add(d)
	for n := 0; time.Now().Before(end); n++ {
		for i := 0; i < 1e6; i++ {
			n ^= i
		}
	}
}
