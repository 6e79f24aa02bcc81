package printers

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func init() {
	register("poddisruptionbudgets", printer{
		columns: []metav1.TableColumnDefinition{nameColumn,
			col("Min Available", "string", "The minimum number of pods that must be available."),
			col("Max Unavailable", "string", "The maximum number of pods that may be unavailable."),
			col("Allowed Disruptions", "integer", "Calculated number of pods that may be disrupted at this time."),
			ageColumn,
		},
		cells: typed(func(p *policyv1.PodDisruptionBudget, now time.Time) []any {
			return []any{p.Name, intOrNA(p.Spec.MinAvailable), intOrNA(p.Spec.MaxUnavailable), int64(p.Status.DisruptionsAllowed), Age(p.CreationTimestamp, now)}
		}),
	})
	register("endpoints", printer{
		columns: []metav1.TableColumnDefinition{nameColumn,
			col("Endpoints", "string", "Endpoints of the object."),
			ageColumn,
		},
		cells: typed(func(ep *corev1.Endpoints, now time.Time) []any {
			return []any{ep.Name, formatEndpoints(ep), Age(ep.CreationTimestamp, now)}
		}),
	})
}

func intOrNA(v *intstr.IntOrString) string {
	if v == nil {
		return "N/A"
	}
	return v.String()
}

// formatEndpoints lists ready address:port pairs as kubectl does, the first few then "+ N more...".
func formatEndpoints(ep *corev1.Endpoints) string {
	var list []string
	total := 0
	add := func(s string) {
		if len(list) < maxShownEndpoints {
			list = append(list, s)
		}
		total++
	}
	for _, ss := range ep.Subsets {
		for _, a := range ss.Addresses {
			if len(ss.Ports) == 0 {
				add(a.IP)
			}
			for _, p := range ss.Ports {
				add(net.JoinHostPort(a.IP, strconv.Itoa(int(p.Port))))
			}
		}
	}
	if total == 0 {
		return "<none>"
	}
	s := strings.Join(list, ",")
	if total > len(list) {
		s += fmt.Sprintf(" + %d more...", total-len(list))
	}
	return s
}
