package apiserver

import (
	"errors"
	"net/http"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/skiff-sh/skiff/bus/statelog"
)

// ReasonInsufficientStorage is the Status reason of a write refused for want of disk space
// (HTTP 507, RFC 4918); metav1 has none for it.
const ReasonInsufficientStorage metav1.StatusReason = "InsufficientStorage"

// writeFailed is the answer to a state-log write that failed for a reason of the store's:
// 507 when its disk has no room for a growing write (deletes still work then), 500 otherwise.
func writeFailed(err error) error {
	if errors.Is(err, statelog.ErrInsufficientStorage) {
		return &apierrors.StatusError{ErrStatus: metav1.Status{
			Status:  metav1.StatusFailure,
			Code:    http.StatusInsufficientStorage,
			Reason:  ReasonInsufficientStorage,
			Message: "insufficient storage: " + strings.TrimPrefix(err.Error(), statelog.ErrInsufficientStorage.Error()+": "),
		}}
	}
	return apierrors.NewInternalError(err)
}
