package policy

// The generated netpol_bpfel.{go,o} are committed so a build needs no clang.
//go:generate go tool bpf2go -tags linux -target bpfel -output-stem netpol -go-package policy -type endpoint -type rule_key -type rule_val -type port_range -type ct_key -type ct_val -cflags "-O2 -g -Wall -Werror" netpol ../netpol.c -- -I../include
