package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"sort"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-sh/skiff/actors/apiclient"
	"github.com/skiff-sh/skiff/schemas"
)

// revisionAnnotation is where the deployment controller numbers a Deployment's ReplicaSets.
const revisionAnnotation = "deployment.kubernetes.io/revision"

func newScale(g *globals) *cobra.Command {
	var replicas int32
	cmd := &cobra.Command{
		Use:   "scale (TYPE NAME | TYPE/NAME) --replicas=N",
		Short: "Set the replicas of a Deployment or ReplicaSet",
		Args:  cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			k, name, err := objectArg(args)
			if err != nil {
				return err
			}
			patch := fmt.Sprintf(`{"spec":{"replicas":%d}}`, replicas)
			if _, err := g.client().Raw(cmd.Context(), "PATCH", apiclient.Path(k, g.namespace, name, "scale"), "application/merge-patch+json", []byte(patch)); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s scaled\n", qualifiedName(k, name))
			return nil
		},
	}
	cmd.Flags().Int32Var(&replicas, "replicas", 1, "desired replicas")
	_ = cmd.MarkFlagRequired("replicas")
	return cmd
}

func newRollout(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "rollout", Short: "Follow, list and undo Deployment rollouts"}
	var timeout time.Duration
	status := &cobra.Command{
		Use:   "status deploy/NAME",
		Short: "Wait until the rollout has finished",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name, err := deploymentArg(args[0])
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			return rolloutStatus(ctx, cmd, g, name)
		},
	}
	status.Flags().DurationVar(&timeout, "timeout", 5*time.Minute, "give up after this long")
	history := &cobra.Command{
		Use:   "history deploy/NAME",
		Short: "List the revisions of a Deployment",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name, err := deploymentArg(args[0])
			if err != nil {
				return err
			}
			rss, err := ownedReplicaSets(cmd.Context(), g, name)
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 3, 0, 3, ' ', 0)
			fmt.Fprintln(tw, "REVISION\tREPLICASET\tIMAGES\tCHANGE-CAUSE")
			for _, rs := range rss {
				cause := rs.Annotations["kubernetes.io/change-cause"]
				if cause == "" {
					cause = "<none>"
				}
				fmt.Fprintf(tw, "%d\t%s\t%s\t%s\n", revision(rs), rs.Name, images(rs), cause)
			}
			return tw.Flush()
		},
	}
	var toRevision int64
	undo := &cobra.Command{
		Use:   "undo deploy/NAME",
		Short: "Roll back to the previous revision (or --to-revision)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name, err := deploymentArg(args[0])
			if err != nil {
				return err
			}
			return rolloutUndo(cmd, g, name, toRevision)
		},
	}
	undo.Flags().Int64Var(&toRevision, "to-revision", 0, "revision to return to (0 = the one before the current)")
	cmd.AddCommand(status, history, undo)
	return cmd
}

func deploymentArg(arg string) (string, error) {
	for _, p := range []string{"deploy/", "deployment/", "deployments/", "deployment.apps/"} {
		if len(arg) > len(p) && arg[:len(p)] == p {
			return arg[len(p):], nil
		}
	}
	return "", fmt.Errorf("want deploy/NAME, got %q", arg)
}

func deploymentKind() *schemas.Kind {
	k, _ := schemas.ByResource("apps", "v1", "deployments")
	return k
}
func replicaSetKind() *schemas.Kind {
	k, _ := schemas.ByResource("apps", "v1", "replicasets")
	return k
}

func revision(rs *appsv1.ReplicaSet) int64 {
	n, _ := strconv.ParseInt(rs.Annotations[revisionAnnotation], 10, 64)
	return n
}

func images(rs *appsv1.ReplicaSet) string {
	out := ""
	for i, c := range rs.Spec.Template.Spec.Containers {
		if i > 0 {
			out += ","
		}
		out += c.Image
	}
	return out
}

// ownedReplicaSets lists a Deployment's ReplicaSets by revision.
func ownedReplicaSets(ctx context.Context, g *globals, name string) ([]*appsv1.ReplicaSet, error) {
	c := g.client()
	obj, err := c.Get(ctx, deploymentKind(), g.namespace, name)
	if err != nil {
		return nil, err
	}
	d := obj.(*appsv1.Deployment)
	objs, _, err := c.List(ctx, replicaSetKind(), g.namespace, url.Values{})
	if err != nil {
		return nil, err
	}
	var out []*appsv1.ReplicaSet
	for _, o := range objs {
		rs := o.(*appsv1.ReplicaSet)
		if ref := metav1.GetControllerOf(rs); ref != nil && ref.UID == d.UID {
			out = append(out, rs)
		}
	}
	sort.Slice(out, func(i, j int) bool { return revision(out[i]) < revision(out[j]) })
	return out, nil
}

func rolloutStatus(ctx context.Context, cmd *cobra.Command, g *globals, name string) error {
	c := g.client()
	last := ""
	for {
		obj, err := c.Get(ctx, deploymentKind(), g.namespace, name)
		if err != nil {
			return err
		}
		d := obj.(*appsv1.Deployment)
		want := int32(1)
		if d.Spec.Replicas != nil {
			want = *d.Spec.Replicas
		}
		st := d.Status
		var msg string
		switch {
		case st.ObservedGeneration < d.Generation:
			msg = "Waiting for deployment spec update to be observed..."
		case st.UpdatedReplicas < want:
			msg = fmt.Sprintf("Waiting for deployment %q rollout to finish: %d out of %d new replicas have been updated...", name, st.UpdatedReplicas, want)
		case st.Replicas > st.UpdatedReplicas:
			msg = fmt.Sprintf("Waiting for deployment %q rollout to finish: %d old replicas are pending termination...", name, st.Replicas-st.UpdatedReplicas)
		case st.AvailableReplicas < st.UpdatedReplicas:
			msg = fmt.Sprintf("Waiting for deployment %q rollout to finish: %d of %d updated replicas are available...", name, st.AvailableReplicas, st.UpdatedReplicas)
		default:
			fmt.Fprintf(cmd.OutOrStdout(), "deployment %q successfully rolled out\n", name)
			return nil
		}
		for _, cond := range st.Conditions {
			if cond.Type == appsv1.DeploymentProgressing && cond.Reason == "ProgressDeadlineExceeded" {
				return fmt.Errorf("deployment %q exceeded its progress deadline", name)
			}
		}
		if msg != last {
			fmt.Fprintln(cmd.OutOrStdout(), msg)
			last = msg
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("timed out waiting for the rollout of %q", name)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// rolloutUndo puts an earlier ReplicaSet's pod template back into the Deployment, which the
// deployment controller then rolls out as a new revision.
func rolloutUndo(cmd *cobra.Command, g *globals, name string, to int64) error {
	rss, err := ownedReplicaSets(cmd.Context(), g, name)
	if err != nil {
		return err
	}
	if len(rss) == 0 {
		return fmt.Errorf("deployment %q has no revisions", name)
	}
	var target *appsv1.ReplicaSet
	if to == 0 {
		if len(rss) < 2 {
			return fmt.Errorf("no rollout history found for deployment %q", name)
		}
		target = rss[len(rss)-2]
	} else {
		for _, rs := range rss {
			if revision(rs) == to {
				target = rs
			}
		}
		if target == nil {
			return fmt.Errorf("unable to find revision %d of deployment %q", to, name)
		}
	}
	tmpl := target.Spec.Template.DeepCopy()
	delete(tmpl.Labels, appsv1.DefaultDeploymentUniqueLabelKey)
	patch, err := json.Marshal(map[string]any{"spec": map[string]any{"template": tmpl}})
	if err != nil {
		return err
	}
	if _, err := g.client().Raw(cmd.Context(), "PATCH", apiclient.Path(deploymentKind(), g.namespace, name, ""), "application/merge-patch+json", patch); err != nil {
		return err
	}
	fmt.Fprintf(cmd.OutOrStdout(), "deployment.apps/%s rolled back to revision %d\n", name, revision(target))
	return nil
}
