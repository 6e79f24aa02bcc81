package apiserver

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/skiff-sh/skiff/schemas"
)

// writeJSON writes v as the response body with the given status code. The encoder marshals
// into its pooled buffer and writes that, newline included: no copy of the body is made, and
// nothing is written (the header included) unless v encodes.
func writeJSON(w http.ResponseWriter, code int, v any) {
	r := &jsonResponse{w: w, code: code}
	if err := json.NewEncoder(r).Encode(v); err != nil && !r.started {
		writeError(w, apierrors.NewInternalError(err))
	}
}

// writeAnswer answers with obj in the negotiated answer a: its metadata alone when a asks
// for that, in protobuf when a is and obj has a protobuf form, else in JSON.
func writeAnswer(w http.ResponseWriter, a answer, code int, obj runtime.Object) {
	if a.metadata() {
		var err error
		if obj, err = metadataAnswer(obj, a); err != nil {
			writeError(w, err)
			return
		}
	}
	writeEncoded(w, a.protobuf, code, obj)
}

// writeEncoded answers with obj in protobuf if asked and obj has a protobuf form, else JSON.
func writeEncoded(w http.ResponseWriter, protobuf bool, code int, obj runtime.Object) {
	if protobuf {
		data, ok, err := schemas.EncodeProtobuf(obj)
		if err != nil {
			writeError(w, apierrors.NewInternalError(err))
			return
		}
		if ok {
			w.Header().Set("Content-Type", schemas.ContentTypeProtobuf)
			w.WriteHeader(code)
			writeOwned(w, data) // encoded for this answer alone
			return
		}
	}
	writeJSON(w, code, obj)
}

// jsonResponse sends the JSON header and the status code on the body's first write.
type jsonResponse struct {
	w       http.ResponseWriter
	code    int
	started bool
}

func (r *jsonResponse) Write(p []byte) (int, error) {
	if !r.started {
		r.started = true
		r.w.Header().Set("Content-Type", "application/json")
		r.w.WriteHeader(r.code)
	}
	return r.w.Write(p)
}

// writeError writes err as a metav1.Status with the HTTP code it carries.
func writeError(w http.ResponseWriter, err error) {
	st := toStatus(err)
	body, _ := json.Marshal(st)
	w.Header().Set("Content-Type", "application/json")
	if st.Details != nil && st.Details.RetryAfterSeconds > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int(st.Details.RetryAfterSeconds)))
	}
	w.WriteHeader(int(st.Code))
	_, _ = w.Write(body)
	_, _ = w.Write([]byte("\n"))
}

func toStatus(err error) *metav1.Status {
	var apiStatus apierrors.APIStatus
	if errors.As(err, &apiStatus) {
		st := apiStatus.Status()
		st.Kind, st.APIVersion = "Status", "v1"
		if st.Code == 0 {
			st.Code = http.StatusInternalServerError
		}
		return &st
	}
	st := apierrors.NewInternalError(err).Status()
	st.Kind, st.APIVersion = "Status", "v1"
	return &st
}

func badRequest(format string, args ...any) error {
	return apierrors.NewBadRequest(fmt.Sprintf(format, args...))
}
