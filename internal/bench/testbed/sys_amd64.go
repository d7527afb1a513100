package testbed

// sysSetns is setns(2) on linux/amd64 (the syscall package lacks it; this
// avoids a golang.org/x/sys dependency for one number).
const sysSetns = 308
