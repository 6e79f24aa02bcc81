package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-sh/skiff/actors/apiclient"
	"github.com/skiff-sh/skiff/schemas"
)

func newApply(g *globals) *cobra.Command {
	var files []string
	cmd := &cobra.Command{
		Use:   "apply -f FILE|DIR|-",
		Short: "Create or update objects from manifests",
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(files) == 0 {
				return fmt.Errorf("-f is required")
			}
			ms, err := readManifests(files)
			if err != nil {
				return err
			}
			c := g.client()
			for _, m := range ms {
				result, err := applyOne(cmd, c, g.namespace, m.doc)
				if err != nil {
					return err
				}
				fmt.Fprintln(cmd.OutOrStdout(), result)
			}
			return nil
		},
	}
	cmd.Flags().StringSliceVarP(&files, "filename", "f", nil, "manifest file, directory, or - for stdin")
	return cmd
}

// applyOne creates the object, or applies it (server-side) over the existing one.
func applyOne(cmd *cobra.Command, c *apiclient.Client, defaultNS string, d schemas.Document) (string, error) {
	k, _ := schemas.ByGVK(d.GVK)
	m := d.Object.(metav1.Object)
	ns := ""
	if k.Namespaced {
		ns = m.GetNamespace()
		if ns == "" {
			ns = defaultNS
			m.SetNamespace(ns)
		}
	}
	name := qualifiedName(k, m.GetName())
	body, err := json.Marshal(d.Object)
	if err != nil {
		return "", err
	}
	cur, err := c.Get(cmd.Context(), k, ns, m.GetName())
	if apierrors.IsNotFound(err) {
		q := url.Values{"fieldValidation": {"Strict"}, "fieldManager": {"skiff"}}
		if _, err := c.Raw(cmd.Context(), http.MethodPost, apiclient.Path(k, ns, "", "")+"?"+q.Encode(), "application/json", body); err != nil {
			return "", fmt.Errorf("%s: %w", name, err)
		}
		return name + " created", nil
	}
	if err != nil {
		return "", fmt.Errorf("%s: %w", name, err)
	}
	out, err := c.Patch(cmd.Context(), k, ns, m.GetName(), "", "application/apply-patch+yaml", body)
	if err != nil {
		return "", fmt.Errorf("%s: %w", name, err)
	}
	if out.(metav1.Object).GetResourceVersion() == cur.(metav1.Object).GetResourceVersion() {
		return name + " unchanged", nil
	}
	return name + " configured", nil
}
