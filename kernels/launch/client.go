package launch

import "context"

// Client is the typed parent-side API over a Supervisor.
type Client struct{ S *Supervisor }

// Hello starts the child if needed and identifies it.
func (c Client) Hello(ctx context.Context) (*HelloResponse, error) {
	var r HelloResponse
	return &r, c.S.Call(ctx, OpHello, struct{}{}, &r)
}

// Load loads a program under req.Handle.
func (c Client) Load(ctx context.Context, req *LoadRequest) (*LoadResponse, error) {
	var r LoadResponse
	return &r, c.S.Call(ctx, OpLoad, req, &r)
}

// Update replaces a loaded program's params.
func (c Client) Update(ctx context.Context, req *UpdateRequest) error {
	return c.S.Call(ctx, OpUpdate, req, nil)
}

// Run launches once.
func (c Client) Run(ctx context.Context, req *RunRequest) (*RunResponse, error) {
	var r RunResponse
	return &r, c.S.Call(ctx, OpRun, req, &r)
}

// Time times a candidate, interleaved with an incumbent when named.
func (c Client) Time(ctx context.Context, req *TimeRequest) (*Comparison, error) {
	var r Comparison
	return &r, c.S.Call(ctx, OpTime, req, &r)
}

// Unload frees a handle.
func (c Client) Unload(ctx context.Context, handle string) error {
	return c.S.Call(ctx, OpUnload, &UnloadRequest{Handle: handle}, nil)
}

// Read reads buffers of a loaded program without launching it.
func (c Client) Read(ctx context.Context, req *ReadRequest) (*RunResponse, error) {
	var r RunResponse
	return &r, c.S.Call(ctx, OpRead, req, &r)
}
