package apiserver

import (
	"encoding/json"
	"fmt"
	"io"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/skiff-sh/skiff/schemas"
)

// contentTypeProtobufWatch is the Content-Type kube-apiserver gives a protobuf watch stream;
// client-go picks its frame reader by it.
const contentTypeProtobufWatch = schemas.ContentTypeProtobuf + ";stream=watch"

// watchEventSerializer encodes the metav1.WatchEvent around each object without an envelope:
// the stream serializer of apimachinery's protobuf media type.
var watchEventSerializer = protobuf.NewRawSerializer(schemas.Scheme, schemas.Scheme)

// protobufFrames writes a watch as kube-apiserver streams it in protobuf: one frame per
// event, a 4-byte big-endian length then a metav1.WatchEvent whose object is the object's
// own protobuf envelope (the "k8s\x00" magic and a runtime.Unknown naming its kind).
type protobufFrames struct {
	frames io.Writer
	alloc  runtime.Allocator // one buffer reused for every event of this watch
}

func newProtobufFrames(w io.Writer) *protobufFrames {
	return &protobufFrames{frames: protobuf.LengthDelimitedFramer.NewFrameWriter(w)}
}

// send frames one event around object, an encoded envelope (shared with other watchers:
// the event is encoded into this watch's buffer, object is not modified).
func (p *protobufFrames) send(t watch.EventType, object []byte) error {
	ev := metav1.WatchEvent{Type: string(t), Object: runtime.RawExtension{Raw: object}}
	return watchEventSerializer.EncodeWithAllocator(&ev, p.frames, &p.alloc)
}

// encodeIn is obj in protobuf (its envelope; an object without a protobuf form is an error)
// or JSON, as a watch event carries it.
func encodeIn(obj runtime.Object, protobuf bool) ([]byte, error) {
	if !protobuf {
		return json.Marshal(obj)
	}
	data, ok, err := schemas.EncodeProtobuf(obj)
	if err == nil && !ok {
		err = fmt.Errorf("%T has no protobuf form", obj)
	}
	return data, err
}
