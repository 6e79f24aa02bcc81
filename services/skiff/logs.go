package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/url"
	"os"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/skiff-sh/skiff/actors/apiclient"
	"github.com/skiff-sh/skiff/actors/nodeapi"
	"github.com/skiff-sh/skiff/schemas"
)

func podKind() *schemas.Kind { k, _ := schemas.ByResource("", "v1", "pods"); return k }

func newLogs(g *globals) *cobra.Command {
	var follow, previous, timestamps bool
	var container string
	var tail int64
	var since time.Duration
	cmd := &cobra.Command{
		Use:   "logs POD",
		Short: "Print a container's log (through the apiserver's pods/log, so kubectl logs works too)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			q := url.Values{}
			if follow {
				q.Set("follow", "true")
			}
			if previous {
				q.Set("previous", "true")
			}
			if container != "" {
				q.Set("container", container)
			}
			if tail >= 0 {
				q.Set("tailLines", strconv.FormatInt(tail, 10))
			}
			if timestamps {
				q.Set("timestamps", "true")
			}
			if since != 0 {
				// Whole seconds, rounded up, as kubectl sends --since.
				q.Set("sinceSeconds", strconv.FormatInt(int64(math.Ceil(since.Seconds())), 10))
			}
			rc, err := g.transport().Stream(cmd.Context(), apiclient.Path(podKind(), g.namespace, args[0], "log")+"?"+q.Encode(), "")
			if err != nil {
				return err
			}
			defer rc.Close()
			_, err = io.Copy(cmd.OutOrStdout(), rc)
			return err
		},
	}
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "keep streaming")
	cmd.Flags().BoolVarP(&previous, "previous", "p", false, "the previous (crashed) container's log")
	cmd.Flags().StringVarP(&container, "container", "c", "", "container name (needed with several)")
	cmd.Flags().Int64Var(&tail, "tail", -1, "only the last N lines")
	cmd.Flags().BoolVar(&timestamps, "timestamps", false, "prefix each line with its time (RFC3339Nano)")
	cmd.Flags().DurationVar(&since, "since", 0, "only lines newer than this, e.g. 5s or 2m")
	return cmd
}

func newExec(g *globals) *cobra.Command {
	var container string
	var stdin bool
	cmd := &cobra.Command{
		Use:   "exec POD -- COMMAND [ARGS...]",
		Short: "Run a command in a container (no terminal) and print its output",
		Args:  cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			q := url.Values{"command": args[1:]}
			if container != "" {
				q.Set("container", container)
			}
			var in []byte
			if stdin {
				var err error
				if in, err = io.ReadAll(os.Stdin); err != nil {
					return err
				}
			}
			out, err := g.client().Raw(cmd.Context(), "POST", apiclient.Path(podKind(), g.namespace, args[0], "exec")+"?"+q.Encode(), "application/octet-stream", in)
			if err != nil {
				return err
			}
			var rep nodeapi.ExecReply
			if err := json.Unmarshal(out, &rep); err != nil {
				return err
			}
			_, _ = cmd.OutOrStdout().Write(rep.Stdout)
			_, _ = cmd.ErrOrStderr().Write(rep.Stderr)
			if rep.ExitCode != 0 {
				return fmt.Errorf("command terminated with exit code %d", rep.ExitCode)
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&container, "container", "c", "", "container name (needed with several)")
	cmd.Flags().BoolVarP(&stdin, "stdin", "i", false, "pass this command's stdin to the container")
	return cmd
}
