package printers

import (
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func init() {
	register("networkpolicies", printer{
		columns: []metav1.TableColumnDefinition{nameColumn,
			col("Pod-Selector", "string", "The pods the policy selects."),
			ageColumn,
		},
		cells: typed(func(np *networkingv1.NetworkPolicy, now time.Time) []any {
			return []any{np.Name, metav1.FormatLabelSelector(&np.Spec.PodSelector), Age(np.CreationTimestamp, now)}
		}),
	})
}
