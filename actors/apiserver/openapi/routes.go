package openapi

import (
	"net/http"
	"strings"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/kube-openapi/pkg/common"

	"github.com/skiff-sh/skiff/schemas"
)

// The REST routes of the served kinds, described through kube-openapi's common.Route
// interfaces so its builders (the ones kube-apiserver uses) turn them into paths, parameters
// and responses. Names, actions and parameters follow kube-apiserver's installer, so operation
// ids ("patchAppsV1NamespacedDeployment") and x-kubernetes-action match what clients expect.

type param struct {
	name, desc, dataType string
	kind                 common.ParameterKind
	required             bool
}

func (p param) Name() string               { return p.name }
func (p param) Description() string        { return p.desc }
func (p param) Required() bool             { return p.required }
func (p param) Kind() common.ParameterKind { return p.kind }
func (p param) DataType() string           { return p.dataType }
func (p param) AllowMultiple() bool        { return false }

type response struct {
	code  int
	msg   string
	model any
}

func (r response) Code() int       { return r.code }
func (r response) Message() string { return r.msg }
func (r response) Model() any      { return r.model }

type route struct {
	method, path, op, desc string
	tag                    string // kube-apiserver's "apps_v1", "core_v1"
	params                 []common.Parameter
	consumes, produces     []string
	meta                   map[string]any
	body, out              any
	responses              []common.StatusCodeResponse
}

func (r *route) Method() string                                   { return r.method }
func (r *route) Path() string                                     { return r.path }
func (r *route) OperationName() string                            { return r.op }
func (r *route) Parameters() []common.Parameter                   { return r.params }
func (r *route) Description() string                              { return r.desc }
func (r *route) Consumes() []string                               { return r.consumes }
func (r *route) Produces() []string                               { return r.produces }
func (r *route) Metadata() map[string]any                         { return r.meta }
func (r *route) RequestPayloadSample() any                        { return r.body }
func (r *route) ResponsePayloadSample() any                       { return r.out }
func (r *route) StatusCodeResponses() []common.StatusCodeResponse { return r.responses }

// container is one group-version's routes.
type container struct {
	root   string
	routes []common.Route
}

func (c *container) RootPath() string                   { return c.root }
func (c *container) PathParameters() []common.Parameter { return nil }
func (c *container) Routes() []common.Route             { return c.routes }

// join concatenates parameter lists into a new slice, so no two routes share a backing array.
func join(lists ...[]common.Parameter) []common.Parameter {
	var out []common.Parameter
	for _, l := range lists {
		out = append(out, l...)
	}
	return out
}

func ps(p ...common.Parameter) []common.Parameter { return p }

func query(name, dataType, desc string) common.Parameter {
	return param{name: name, desc: desc, dataType: dataType, kind: common.QueryParameterKind}
}

func pathParam(name, desc string) common.Parameter {
	return param{name: name, desc: desc, dataType: "string", kind: common.PathParameterKind, required: true}
}

var (
	bodyParam  = param{name: "body", kind: common.BodyParameterKind, required: true}
	pretty     = query("pretty", "string", "If 'true', then the output is pretty printed.")
	dryRun     = query("dryRun", "string", "When present, indicates that modifications should not be persisted. Valid values are: - All: all dry run stages will be processed")
	manager    = query("fieldManager", "string", "fieldManager is a name associated with the actor or entity that is making these changes.")
	validation = query("fieldValidation", "string", "fieldValidation instructs the server on how to handle objects in the request (POST/PUT/PATCH) containing unknown or duplicate fields. Valid values are: - Ignore - Warn - Strict")
	force      = query("force", "boolean", "Force is going to \"force\" Apply requests. It means user will re-acquire conflicting fields owned by other people.")
	listParams = []common.Parameter{
		query("allowWatchBookmarks", "boolean", "allowWatchBookmarks requests watch events with type \"BOOKMARK\"."),
		query("continue", "string", "The continue option should be set when retrieving more results from the server."),
		query("fieldSelector", "string", "A selector to restrict the list of returned objects by their fields. Defaults to everything."),
		query("labelSelector", "string", "A selector to restrict the list of returned objects by their labels. Defaults to everything."),
		query("limit", "integer", "limit is a maximum number of responses to return for a list call."),
		query("resourceVersion", "string", "resourceVersion sets a constraint on what resource versions a request may be served from."),
		query("resourceVersionMatch", "string", "resourceVersionMatch determines how resourceVersion is applied to list calls."),
		query("sendInitialEvents", "boolean", "`sendInitialEvents=true` may be set together with `watch=true`."),
		query("timeoutSeconds", "integer", "Timeout for the list/watch call."),
		query("watch", "boolean", "Watch for changes to the described resources and return them as a stream of add, update, and remove notifications."),
	}
	deleteParams = []common.Parameter{
		query("gracePeriodSeconds", "integer", "The duration in seconds before the object should be deleted."),
		query("propagationPolicy", "string", "Whether and how garbage collection will be performed: 'Orphan', 'Background' or 'Foreground'."),
	}
	jsonTypes  = []string{"application/json", "application/yaml", "application/vnd.kubernetes.protobuf"}
	listTypes  = append(append([]string{}, jsonTypes...), "application/json;stream=watch", "application/vnd.kubernetes.protobuf;stream=watch")
	patchTypes = []string{"application/json-patch+json", "application/merge-patch+json", "application/strategic-merge-patch+json", "application/apply-patch+yaml"}
)

// gvName is kube-apiserver's operation-id spelling of a group version: "CoreV1", "AppsV1",
// "RbacAuthorizationV1".
func gvName(gv schema.GroupVersion) string {
	group := gv.Group
	if group == "" {
		group = "core"
	}
	group = strings.TrimSuffix(group, ".k8s.io")
	var b strings.Builder
	for _, part := range strings.FieldsFunc(group, func(r rune) bool { return r == '.' || r == '-' }) {
		b.WriteString(strings.ToUpper(part[:1]) + part[1:])
	}
	return b.String() + strings.ToUpper(gv.Version[:1]) + gv.Version[1:]
}

// gvTag is kube-apiserver's operation tag of a group version: "core_v1", "rbacAuthorization_v1".
func gvTag(gv schema.GroupVersion) string {
	name := gvName(schema.GroupVersion{Group: gv.Group, Version: "x"})
	name = strings.ToLower(name[:1]) + name[1:len(name)-1]
	return name + "_" + gv.Version
}

// kindRoutes describes every served verb of one kind, its subresources included.
func kindRoutes(k *schemas.Kind) []common.Route {
	gv := k.GVK.GroupVersion()
	obj, list := k.New(), k.NewList()
	prefix := "/api/" + gv.Version
	if gv.Group != "" {
		prefix = "/apis/" + gv.Group + "/" + gv.Version
	}
	scope, opScope := prefix+"/", ""
	var scopeParams []common.Parameter
	if k.Namespaced {
		scope, opScope = prefix+"/namespaces/{namespace}/", "Namespaced"
		scopeParams = []common.Parameter{pathParam("namespace", "object name and auth scope, such as for teams and projects")}
	}
	coll, item := scope+k.Resource, scope+k.Resource+"/{name}"
	itemParams := join(ps(pathParam("name", "name of the "+k.GVK.Kind)), scopeParams)
	b := routeBuilder{gvk: k.GVK, opName: gvName(gv) + opScope + k.GVK.Kind, tag: gvTag(gv)}
	routes := []common.Route{
		b.make("list", http.MethodGet, coll, "list", "list or watch objects of kind "+k.GVK.Kind, nil, list, join(scopeParams, listParams), listTypes),
		b.make("create", http.MethodPost, coll, "post", "create a "+k.GVK.Kind, obj, obj, join(scopeParams, ps(dryRun, manager, validation)), jsonTypes,
			response{201, "Created", obj}, response{202, "Accepted", obj}),
		b.make("deleteCollection", http.MethodDelete, coll, "deletecollection", "delete collection of "+k.GVK.Kind, &metav1.DeleteOptions{}, &metav1.Status{},
			join(scopeParams, ps(dryRun), deleteParams, listParams[:len(listParams)-1]), jsonTypes),
		b.make("read", http.MethodGet, item, "get", "read the specified "+k.GVK.Kind, nil, obj, itemParams, jsonTypes),
		b.make("replace", http.MethodPut, item, "put", "replace the specified "+k.GVK.Kind, obj, obj, join(itemParams, ps(dryRun, manager, validation)), jsonTypes,
			response{201, "Created", obj}),
		b.make("patch", http.MethodPatch, item, "patch", "partially update the specified "+k.GVK.Kind, &metav1.Patch{}, obj,
			join(itemParams, ps(dryRun, manager, validation, force)), jsonTypes, response{201, "Created", obj}),
		b.make("delete", http.MethodDelete, item, "delete", "delete a "+k.GVK.Kind, &metav1.DeleteOptions{}, &metav1.Status{},
			join(itemParams, ps(dryRun), deleteParams), jsonTypes, response{202, "Accepted", &metav1.Status{}}),
	}
	if k.Namespaced {
		all := routeBuilder{gvk: k.GVK, opName: gvName(gv) + k.GVK.Kind + "ForAllNamespaces", tag: b.tag}
		routes = append(routes, all.make("list", http.MethodGet, prefix+"/"+k.Resource, "list", "list or watch objects of kind "+k.GVK.Kind, nil, list, listParams, listTypes))
	}
	for _, sub := range k.Subresources {
		routes = append(routes, subresourceRoutes(b, item+"/"+sub, sub, obj, itemParams)...)
	}
	return routes
}

func subresourceRoutes(b routeBuilder, path, sub string, obj any, params []common.Parameter) []common.Route {
	write := join(params, ps(dryRun, manager, validation))
	switch sub {
	case "status", "scale":
		if sub == "scale" {
			obj = &autoscalingv1.Scale{}
			b.gvk = autoscalingv1.SchemeGroupVersion.WithKind("Scale")
		}
		s := b.sub(strings.ToUpper(sub[:1]) + sub[1:])
		return []common.Route{
			s.make("read", http.MethodGet, path, "get", "read "+sub+" of the specified "+b.kind(), nil, obj, params, jsonTypes),
			s.make("replace", http.MethodPut, path, "put", "replace "+sub+" of the specified "+b.kind(), obj, obj, write, jsonTypes, response{201, "Created", obj}),
			s.make("patch", http.MethodPatch, path, "patch", "partially update "+sub+" of the specified "+b.kind(), &metav1.Patch{}, obj,
				join(write, ps(force)), jsonTypes, response{201, "Created", obj}),
		}
	case "binding":
		s := b.sub("Binding")
		s.gvk = corev1.SchemeGroupVersion.WithKind("Binding")
		binding := &corev1.Binding{}
		return []common.Route{s.make("create", http.MethodPost, path, "post", "create binding of a Pod", binding, binding, write, jsonTypes,
			response{201, "Created", binding}, response{202, "Accepted", binding})}
	case "log":
		s := b.sub("Log")
		r := s.make("read", http.MethodGet, path, "get", "read log of the specified Pod", nil, "", join(params, ps(
			query("container", "string", "The container for which to stream logs."),
			query("follow", "boolean", "Follow the log stream of the pod."),
			query("previous", "boolean", "Return previous terminated container logs."),
			query("sinceSeconds", "integer", "A relative time in seconds before the current time from which to show logs."),
			query("tailLines", "integer", "If set, the number of lines from the end of the logs to show."),
			query("timestamps", "boolean", "If true, add an RFC3339 timestamp at the beginning of every line of log output."))),
			[]string{"text/plain", "application/json", "application/yaml", "application/vnd.kubernetes.protobuf"})
		return []common.Route{r}
	case "exec", "attach":
		s := b.sub(strings.ToUpper(sub[:1]) + sub[1:])
		streams := ps(query("container", "string", "The container in which to run the command or to attach to."),
			query("stdin", "boolean", "Redirect the standard input stream of the pod for this call."),
			query("stdout", "boolean", "Redirect the standard output stream of the pod for this call."),
			query("stderr", "boolean", "Redirect the standard error stream of the pod for this call."),
			query("tty", "boolean", "TTY if true indicates that a tty will be allocated for the call."))
		if sub == "exec" {
			streams = append(streams, ps(query("command", "string", "Command is the remote command to execute."))...)
		}
		return connectRoutes(s, path, sub, join(params, streams))
	case "portforward":
		return connectRoutes(b.sub("Portforward"), path, sub, join(params, ps(
			query("ports", "integer", "List of ports to forward."))))
	}
	return nil
}

// connectRoutes are the GET and POST of a streaming subresource of Pod.
func connectRoutes(s routeBuilder, path, sub string, params []common.Parameter) []common.Route {
	return []common.Route{
		s.make("connectGet", http.MethodGet, path, "connect", "connect GET requests to "+sub+" of Pod", nil, "", params, []string{"*/*"}),
		s.make("connectPost", http.MethodPost, path, "connect", "connect POST requests to "+sub+" of Pod", nil, "", params, []string{"*/*"}),
	}
}

// routeBuilder names a kind's operations: verb + "AppsV1Namespaced" + "Deployment" + suffix.
type routeBuilder struct {
	gvk    schema.GroupVersionKind
	opName string
	tag    string
}

func (b routeBuilder) kind() string { return b.gvk.Kind }

func (b routeBuilder) sub(suffix string) routeBuilder {
	b.opName += suffix
	return b
}

func (b routeBuilder) make(verb, method, path, action, desc string, body, out any, params []common.Parameter, produces []string, extra ...response) *route {
	r := &route{method: method, path: path, op: verb + b.opName, desc: desc, tag: b.tag, produces: produces, body: body, out: out,
		meta: map[string]any{
			"x-kubernetes-action":             action,
			"x-kubernetes-group-version-kind": map[string]string{"group": b.gvk.Group, "version": b.gvk.Version, "kind": b.gvk.Kind},
		}}
	r.params = join(ps(pretty), params)
	if body != nil {
		r.params = join(r.params, ps(bodyParam))
		r.consumes = []string{"*/*"}
		if method == http.MethodPatch {
			r.consumes = patchTypes
		}
	}
	if out != nil {
		r.responses = append([]common.StatusCodeResponse{response{200, "OK", out}}, toResponses(extra)...)
	}
	return r
}

func toResponses(rs []response) []common.StatusCodeResponse {
	out := make([]common.StatusCodeResponse, len(rs))
	for i, r := range rs {
		out[i] = r
	}
	return out
}
