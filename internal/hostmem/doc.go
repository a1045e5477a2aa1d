// Package hostmem reads how much memory this process may use: the host's
// /proc/meminfo, the cgroup (v2 or v1) limit the process runs under, and
// an optional operator-set ceiling. The gpuworker uses it to refuse a trial
// whose model would not fit before allocating anything, and to report its
// capacity to the scheduler, which refuses a campaign no worker could hold.
package hostmem
