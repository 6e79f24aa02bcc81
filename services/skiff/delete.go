package main

import (
	"fmt"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-sh/skiff/schemas"
)

func newDelete(g *globals) *cobra.Command {
	var files []string
	var ignoreNotFound bool
	cmd := &cobra.Command{
		Use:   "delete (TYPE NAME... | -f FILE|DIR|-)",
		Short: "Delete objects by name or by manifest",
		RunE: func(cmd *cobra.Command, args []string) error {
			type target struct {
				k        *schemas.Kind
				ns, name string
			}
			var targets []target
			switch {
			case len(files) > 0:
				ms, err := readManifests(files)
				if err != nil {
					return err
				}
				for _, m := range ms {
					k, _ := schemas.ByGVK(m.doc.GVK)
					om := m.doc.Object.(metav1.Object)
					ns := om.GetNamespace()
					if ns == "" {
						ns = g.namespace
					}
					targets = append(targets, target{k, ns, om.GetName()})
				}
			case len(args) >= 2:
				kinds, err := kindsArg(args[0])
				if err != nil || len(kinds) != 1 {
					return fmt.Errorf("delete takes one TYPE followed by names: %v", err)
				}
				for _, n := range args[1:] {
					targets = append(targets, target{kinds[0], g.namespace, n})
				}
			default:
				return fmt.Errorf("give TYPE NAME... or -f FILE")
			}
			c := g.client()
			for _, t := range targets {
				err := c.Delete(cmd.Context(), t.k, t.ns, t.name, nil)
				if apierrors.IsNotFound(err) && ignoreNotFound {
					continue
				}
				if err != nil {
					return fmt.Errorf("%s: %w", qualifiedName(t.k, t.name), err)
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%s deleted\n", qualifiedName(t.k, t.name))
			}
			return nil
		},
	}
	cmd.Flags().StringSliceVarP(&files, "filename", "f", nil, "manifest file, directory, or - for stdin")
	cmd.Flags().BoolVar(&ignoreNotFound, "ignore-not-found", false, "treat a missing object as deleted")
	return cmd
}
