package trial

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/amk-dev/amk/filemap"
	"github.com/amk-dev/amk/inputfile"
	"github.com/amk-dev/amk/model"
)

// UseWeightsDir makes the cache keep generated (seeded) weights in dir, one
// safetensors file per model and seed: the first evaluator of a host that
// needs a model generates its weights and writes the file (temp file, then
// rename, so a reader never sees half a file); every later load, in this
// process or another, memory-maps the file and reads it instead of
// generating again. Call it before the first Get. Weights that cannot be
// stored (a dtype safetensors cannot hold, or a write error) are still
// used; the model's WeightsNote says where they are or why they were not
// stored (its Source stays "seeded init").
func (c *ModelCache) UseWeightsDir(dir string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.weightsDir = dir
}

// generatedWeightsPath is the file holding cfg's seeded weights in dir: the
// model's name as a file-name slug, then a hash of everything the weights
// depend on (the config as JSON, the seed, model.InitVersion).
func generatedWeightsPath(dir string, cfg model.Config) (string, error) {
	js, err := json.Marshal(cfg)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(fmt.Appendf(js, "\x00seed=%d\x00init=%d", WeightSeed, model.InitVersion))
	slug := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' {
			return r
		}
		return '_'
	}, cfg.Name)
	if len(slug) > 40 {
		slug = slug[:40]
	}
	return filepath.Join(dir, slug+"-"+hex.EncodeToString(sum[:8])+".safetensors"), nil
}

// seededWeights returns cfg's seeded weights — read from the weights
// directory when the file is there and sound, else generated (and stored
// when a directory is set) —, a note saying which, and what releases the
// memory map the weights view (nil for weights in memory).
func (c *ModelCache) seededWeights(ctx context.Context, cfg model.Config) (w model.Weights, note string, unmap func(), err error) {
	c.mu.Lock()
	dir := c.weightsDir
	c.mu.Unlock()
	if dir == "" {
		w, err := model.InitWeightsContext(ctx, cfg, WeightSeed)
		return w, "generated", nil, err
	}
	path, err := generatedWeightsPath(dir, cfg)
	if err != nil {
		return nil, "", nil, err
	}
	if w, unmap, err := readMapped(path, cfg); err == nil {
		return w, "mapped from " + path, unmap, nil
	}
	w, err = model.InitWeightsContext(ctx, cfg, WeightSeed)
	if err != nil {
		return nil, "", nil, err
	}
	if err := storeWeights(path, w); err != nil {
		return w, fmt.Sprintf("generated, not stored: %v", err), nil, nil
	}
	return w, "generated, stored in " + path, nil, nil
}

// storeWeights writes w to path through a temporary file in the same
// directory, synced before the rename.
func storeWeights(path string, w model.Weights) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".weights-*.tmp")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // no-op after a successful rename
	bw := bufio.NewWriterSize(tmp, 1<<20)
	err = model.WriteSafetensors(bw, w)
	if err == nil {
		err = bw.Flush()
	}
	if err == nil {
		err = tmp.Chmod(0o644) // evaluators of the host may run as other users
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// readMapped returns cfg's weights viewing the safetensors file at path
// through a read-only memory map (model.MapSafetensors; read into memory
// where mapping is unavailable), every check of model.ReadSafetensors
// applied, and what releases the mapping. The weights are the mapped
// bytes, not a copy, so evaluators of a host share one copy in the page
// cache; the model cache releases the mapping once no trial uses the model
// and the keep budget lets it go (ModelCache.KeepUnused). The mapping of a
// file that failed the checks is released at once.
func readMapped(path string, cfg model.Config) (model.Weights, func(), error) {
	f, info, err := inputfile.Open(path) // regular files only, never blocks
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	data, unmap, err := mapFile(f, info.Size())
	if err != nil {
		return nil, nil, err
	}
	w, err := model.MapSafetensors(data, cfg)
	if err != nil {
		unmap()
		return nil, nil, err
	}
	return w, unmap, nil
}

// mapFile maps size bytes of f read-only; unmap releases the mapping. A
// file that cannot be mapped (empty, too large for the address space, or
// on a platform without memory maps: filemap.ErrUnsupported) is read into
// memory instead.
func mapFile(f *os.File, size int64) (data []byte, unmap func(), err error) {
	data, err = filemap.Map(f, size)
	if err != nil {
		return readWhole(f, size)
	}
	return data, func() { _ = filemap.Unmap(data) }, nil
}

// readWhole reads size bytes of f into memory (nothing to release).
func readWhole(f *os.File, size int64) ([]byte, func(), error) {
	if size < 0 || int64(int(size)) != size {
		return nil, nil, fmt.Errorf("%s: %d bytes cannot be held in memory", f.Name(), size)
	}
	data := make([]byte, size)
	if _, err := io.ReadFull(f, data); err != nil {
		return nil, nil, fmt.Errorf("reading %s: %w", f.Name(), err)
	}
	return data, func() {}, nil
}
