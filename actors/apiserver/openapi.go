package apiserver

import (
	"github.com/skiff-sh/skiff/actors/apiserver/openapi"
	"github.com/skiff-sh/skiff/schemas"
)

// The OpenAPI documents (package openapi) describe every served kind with k8s.io/api's schemas:
// kubectl explain reads them, kubectl and Helm validate manifests against them, and kubectl sees
// the fieldValidation parameter on every PATCH, so it leaves strict field validation to the
// server, as with kube-apiserver.

func (s *Server) installOpenAPI() {
	reg := openapi.New(schemas.Kinds(), KubernetesVersion)
	s.openapi = reg
	s.mux.Handle("/openapi/v2", reg.ServeV2())
	v3 := reg.ServeV3()
	s.mux.Handle("/openapi/v3", v3)
	s.mux.Handle("/openapi/v3/", v3)
}

// OpenAPI is the registry of the served OpenAPI documents; kinds served beyond the built-in
// ones (custom resources) add their group versions' documents to it.
func (s *Server) OpenAPI() *openapi.Registry { return s.openapi }
