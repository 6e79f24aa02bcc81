package apiserver

import (
	"encoding/json"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/client-go/kubernetes/scheme"
)

// client-go's typed clients send built-in kinds as protobuf. Skiff stores and answers JSON (the
// clients accept it), so a protobuf body is turned into JSON once, at the door.
var protobufSerializer = protobuf.NewSerializer(scheme.Scheme, scheme.Scheme)

const protobufContentType = "application/vnd.kubernetes.protobuf"

func isProtobuf(contentType string) bool {
	return strings.HasPrefix(strings.TrimSpace(contentType), protobufContentType)
}

func protobufToJSON(body []byte) ([]byte, error) {
	obj, _, err := protobufSerializer.Decode(body, nil, nil)
	if err != nil {
		return nil, badRequest("protobuf body: %v", err)
	}
	return json.Marshal(obj)
}
