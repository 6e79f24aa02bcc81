package schemas

import (
	"bytes"
	"encoding/json"
)

var managedFieldsName = []byte(`"managedFields"`)

// StripManagedFields returns a stored object's JSON without metadata.managedFields, for a
// reader that keeps raw objects only to decode them into caches that drop the field anyway.
// Anything it cannot take apart is returned unchanged.
func StripManagedFields(raw []byte) []byte {
	if !bytes.Contains(raw, managedFieldsName) {
		return raw
	}
	var top map[string]json.RawMessage
	if json.Unmarshal(raw, &top) != nil {
		return raw
	}
	var meta map[string]json.RawMessage
	if json.Unmarshal(top["metadata"], &meta) != nil {
		return raw
	}
	if _, ok := meta["managedFields"]; !ok {
		return raw
	}
	delete(meta, "managedFields")
	m, err := json.Marshal(meta)
	if err != nil {
		return raw
	}
	top["metadata"] = m
	out, err := json.Marshal(top)
	if err != nil {
		return raw
	}
	return out
}
