package lb

// The generated sock_lb_bpfel.{go,o} are committed so a build needs no clang.
//go:generate go tool bpf2go -tags linux -target bpfel -output-stem sock_lb -go-package lb -type svc_key -type svc_val -type slot_key -type backend -type member_key -cflags "-O2 -g -Wall -Werror" sockLb ../sock_lb.c -- -I../include
