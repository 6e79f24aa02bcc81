package nodeport

// The generated nodeport_bpfel.{go,o} are committed so a build needs no clang.
//go:generate go tool bpf2go -tags linux -target bpfel -output-stem nodeport -go-package nodeport -type np_key -type np_svc -type np_slot_key -type np_backend -type np_member_key -type np_tuple -type np_nat -cflags "-O2 -g -Wall -Werror" np ../nodeport.c -- -I../include
