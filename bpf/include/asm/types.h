/* Architecture-neutral stand-in so the uapi headers compile for the BPF target. */
#include <asm-generic/types.h>
