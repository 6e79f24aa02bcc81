package printers

import (
	"fmt"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func init() {
	register("statefulsets", printer{
		columns: []metav1.TableColumnDefinition{nameColumn,
			col("Ready", "string", "Number of the pod with ready state"),
			ageColumn,
			wide("Containers", "string", "Names of each container in the template."),
			wide("Images", "string", "Images referenced by each container in the template."),
		},
		cells: typed(func(s *appsv1.StatefulSet, now time.Time) []any {
			names, images := containersAndImages(s.Spec.Template.Spec.Containers)
			return []any{s.Name, fmt.Sprintf("%d/%d", s.Status.ReadyReplicas, replicasOf(s.Spec.Replicas)), Age(s.CreationTimestamp, now), names, images}
		}),
	})
	register("controllerrevisions", printer{
		columns: []metav1.TableColumnDefinition{nameColumn,
			col("Controller", "string", "Controller of the object"),
			col("Revision", "integer", "Revision of the ControllerRevision"),
			ageColumn,
		},
		cells: typed(func(r *appsv1.ControllerRevision, now time.Time) []any {
			return []any{r.Name, controllerName(r.OwnerReferences), r.Revision, Age(r.CreationTimestamp, now)}
		}),
	})
}

// controllerName is kubectl's "<kind>.<group>/<name>" of the controlling owner, or "<none>".
func controllerName(refs []metav1.OwnerReference) string {
	for _, r := range refs {
		if r.Controller == nil || !*r.Controller {
			continue
		}
		gv, err := schema.ParseGroupVersion(r.APIVersion)
		if err != nil {
			return "<none>"
		}
		kind := strings.ToLower(r.Kind)
		if gv.Group != "" {
			kind += "." + gv.Group
		}
		return kind + "/" + r.Name
	}
	return "<none>"
}
