// Package version is the one place amk's binaries (amkctl, scheduler,
// gpuworker) learn their own build: the version, the commit and the build
// date. A build stamps them at link time (the Makefile and the Dockerfiles
// do) with
//
//	go build -ldflags "-X github.com/amk-dev/amk/internal/version.stamp=v1.2.3
//	  -X github.com/amk-dev/amk/internal/version.commit=$(git rev-parse HEAD)
//	  -X github.com/amk-dev/amk/internal/version.date=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
//
// and otherwise they come from the module build information Go records in
// every binary (the module version, or "devel", and the VCS revision when
// the build recorded one), the build date from the executable's own time.
// String is the one-token form for logs, worker fingerprints, metrics and
// flywheel corpus records; Long is what --version prints.
package version
