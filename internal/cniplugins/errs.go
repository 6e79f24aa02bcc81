package cniplugins

import "syscall"

// errExist is netlink's answer for a link or address that is already there.
var errExist = syscall.EEXIST
