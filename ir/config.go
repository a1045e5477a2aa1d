package ir

// TileSize is one named tile dimension of an op archetype, e.g. N_tile=64.
type TileSize struct {
	Name  string
	Value int
}

// TilingEntry holds the tile sizes of one op archetype ("gemv", "attention").
type TilingEntry struct {
	Op    string
	Sizes []TileSize
}

// SMPin is one explicit task -> SM placement.
type SMPin struct {
	Task int
	SM   int
}

// SMAssignment is either a policy name ("round_robin", "load_balance") or an
// explicit map (Explicit non-nil).
type SMAssignment struct {
	Policy   string
	Explicit []SMPin
}

// IsExplicit reports whether the assignment is an explicit map.
func (a SMAssignment) IsExplicit() bool { return a.Explicit != nil }

// ScheduleConfig is the Loop-2 search point as data: what the lowering
// consumed to produce a program. Lowering and its defaults live in schedule/.
type ScheduleConfig struct {
	Tiling            []TilingEntry
	FusionGrouping    [][]string
	SMAssignment      SMAssignment
	PipeliningDepth   int
	PageAllocation    string
	ThreadsPerBlock   int
	SmemBytesPerBlock int
}

// Tile returns tiling[op][name].
func (c *ScheduleConfig) Tile(op, name string) (int, bool) {
	for _, e := range c.Tiling {
		if e.Op != op {
			continue
		}
		for _, s := range e.Sizes {
			if s.Name == name {
				return s.Value, true
			}
		}
	}
	return 0, false
}

// SetTile sets tiling[op][name], keeping insertion order.
func (c *ScheduleConfig) SetTile(op, name string, v int) {
	for i := range c.Tiling {
		if c.Tiling[i].Op != op {
			continue
		}
		for j := range c.Tiling[i].Sizes {
			if c.Tiling[i].Sizes[j].Name == name {
				c.Tiling[i].Sizes[j].Value = v
				return
			}
		}
		c.Tiling[i].Sizes = append(c.Tiling[i].Sizes, TileSize{name, v})
		return
	}
	c.Tiling = append(c.Tiling, TilingEntry{Op: op, Sizes: []TileSize{{name, v}}})
}

// DeleteTile removes tiling[op][name] (and the op entry if it becomes empty).
func (c *ScheduleConfig) DeleteTile(op, name string) {
	for i := range c.Tiling {
		if c.Tiling[i].Op != op {
			continue
		}
		sizes := c.Tiling[i].Sizes[:0:0]
		for _, s := range c.Tiling[i].Sizes {
			if s.Name != name {
				sizes = append(sizes, s)
			}
		}
		c.Tiling[i].Sizes = sizes
		return
	}
}

// Clone returns a deep copy.
func (c *ScheduleConfig) Clone() *ScheduleConfig {
	out := *c
	out.Tiling = make([]TilingEntry, len(c.Tiling))
	for i, e := range c.Tiling {
		out.Tiling[i] = TilingEntry{Op: e.Op, Sizes: append([]TileSize{}, e.Sizes...)}
	}
	out.FusionGrouping = make([][]string, len(c.FusionGrouping))
	for i, g := range c.FusionGrouping {
		out.FusionGrouping[i] = append([]string{}, g...)
	}
	if c.SMAssignment.Explicit != nil {
		out.SMAssignment.Explicit = append([]SMPin{}, c.SMAssignment.Explicit...)
	}
	return &out
}
