package main

import (
	"fmt"
	"net/url"
	"sort"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"

	"github.com/skiff-sh/skiff/schemas"
)

func newEvents(g *globals) *cobra.Command {
	var all bool
	cmd := &cobra.Command{
		Use:   "events",
		Short: "List events, oldest first",
		RunE: func(cmd *cobra.Command, _ []string) error {
			ns := g.namespace
			if all {
				ns = ""
			}
			ek, _ := schemas.ByResource("", "v1", "events")
			objs, _, err := g.client().List(cmd.Context(), ek, ns, url.Values{})
			if err != nil {
				return err
			}
			evs := make([]*corev1.Event, 0, len(objs))
			for _, o := range objs {
				evs = append(evs, o.(*corev1.Event))
			}
			sort.Slice(evs, func(i, j int) bool { return lastSeen(evs[i]).Before(lastSeen(evs[j])) })
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 3, 0, 3, ' ', 0)
			fmt.Fprintln(tw, "LAST SEEN\tTYPE\tREASON\tOBJECT\tMESSAGE")
			now := time.Now()
			for _, e := range evs {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s/%s\t%s\n", schemas.HumanDuration(now.Sub(lastSeen(e))), e.Type, e.Reason,
					e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Message)
			}
			return tw.Flush()
		},
	}
	cmd.Flags().BoolVarP(&all, "all-namespaces", "A", false, "all namespaces")
	return cmd
}
