package main

import (
	"net/http"
	"net/http/pprof"

	"github.com/skiff-sh/skiff/actors/apiserver"
)

// serveProfiling puts net/http/pprof on the API under /debug/pprof/, as kube-apiserver does by
// default: behind the API's authentication and RBAC (a non-resource path only admins are
// granted), so a running control plane is profiled without another port or a restart.
func serveProfiling(api *apiserver.Server) {
	api.Handle("/debug/pprof/", http.HandlerFunc(pprof.Index))
	api.Handle("/debug/pprof/cmdline", http.HandlerFunc(pprof.Cmdline))
	api.Handle("/debug/pprof/profile", http.HandlerFunc(pprof.Profile))
	api.Handle("/debug/pprof/symbol", http.HandlerFunc(pprof.Symbol))
	api.Handle("/debug/pprof/trace", http.HandlerFunc(pprof.Trace))
}
