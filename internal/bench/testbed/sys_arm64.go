package testbed

// sysSetns is setns(2) on linux/arm64 (the syscall package lacks it).
const sysSetns = 268
