package schemas

import (
	"bytes"
	"encoding/json"
	"fmt"
	"unicode/utf8"
)

// checkTypeMeta refuses a body whose apiVersion or kind is not the request's, read as
// encoding/json reads them (keys matched without case).
func checkTypeMeta(k *Kind, raw []byte, fail func([]FieldError, error) error) error {
	var tm struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	if err := json.Unmarshal(raw, &tm); err != nil {
		if _, ok := typeFieldError(raw, err); !ok {
			return fail(nil, fmt.Errorf("the body must be a JSON object: %w", err))
		}
	}
	if (tm.Kind != "" && tm.Kind != k.GVK.Kind) || (tm.APIVersion != "" && tm.APIVersion != k.GVK.GroupVersion().String()) {
		return fail(nil, fmt.Errorf("the body is a %s (%s) but the request is for %s (%s)",
			orUnset(tm.Kind), orUnset(tm.APIVersion), k.GVK.Kind, k.GVK.GroupVersion()))
	}
	return nil
}

// exactTypeKeys: nothing in raw spells "kind" or "apiVersion" but exactly so, so the
// case-sensitive decode and encoding/json's case-folding scan see the same type keys. Only
// ASCII is looked at (encoding/json also folds a few other letters, such as the Kelvin sign).
func exactTypeKeys(raw []byte) bool {
	for _, c := range raw {
		if c >= utf8.RuneSelf {
			return false
		}
	}
	lower := bytes.ToLower(raw)
	return bytes.Count(lower, []byte(`"kind"`)) == bytes.Count(raw, []byte(`"kind"`)) &&
		bytes.Count(lower, []byte(`"apiversion"`)) == bytes.Count(raw, []byte(`"apiVersion"`))
}
