package vm

import "math"

// The inner loops. Each reduction keeps eight independent float32 partial
// sums indexed by element position modulo 8 and adds them in one fixed tree,
// so a result depends only on the operands, never on how a task tiled them.
// The loops walk contiguous memory and take eight elements per step as one
// capped subslice, so the compiler checks bounds once per eight elements.

// dot returns Σ x[i]·w[i] over len(x) elements (w must be at least as long).
func dot(x, w []float32) float32 {
	n := len(x)
	w = w[:n]
	var a0, a1, a2, a3, a4, a5, a6, a7 float32
	i := 0
	for ; i+8 <= n; i += 8 {
		s, t := x[i:i+8:i+8], w[i:i+8:i+8]
		a0 += s[0] * t[0]
		a1 += s[1] * t[1]
		a2 += s[2] * t[2]
		a3 += s[3] * t[3]
		a4 += s[4] * t[4]
		a5 += s[5] * t[5]
		a6 += s[6] * t[6]
		a7 += s[7] * t[7]
	}
	for lane, v := range x[i:] {
		p := v * w[i+lane]
		switch lane {
		case 0:
			a0 += p
		case 1:
			a1 += p
		case 2:
			a2 += p
		case 3:
			a3 += p
		case 4:
			a4 += p
		case 5:
			a5 += p
		default:
			a6 += p
		}
	}
	return ((a0 + a1) + (a2 + a3)) + ((a4 + a5) + (a6 + a7))
}

// dotBF16 is dot with the weights given as bf16 bit patterns (w holds at
// least len(x) values): each weight widens exactly (a shift) to the float32
// dot reads, and the lanes and the final tree are dot's, so the result is
// bit for bit dot's on the widened weights while reading half the bytes.
func dotBF16(x []float32, w []uint16) float32 {
	n := len(x)
	w = w[:n]
	var a0, a1, a2, a3, a4, a5, a6, a7 float32
	i := 0
	for ; i+8 <= n; i += 8 {
		s, t := x[i:i+8:i+8], w[i:i+8:i+8]
		a0 += s[0] * math.Float32frombits(uint32(t[0])<<16)
		a1 += s[1] * math.Float32frombits(uint32(t[1])<<16)
		a2 += s[2] * math.Float32frombits(uint32(t[2])<<16)
		a3 += s[3] * math.Float32frombits(uint32(t[3])<<16)
		a4 += s[4] * math.Float32frombits(uint32(t[4])<<16)
		a5 += s[5] * math.Float32frombits(uint32(t[5])<<16)
		a6 += s[6] * math.Float32frombits(uint32(t[6])<<16)
		a7 += s[7] * math.Float32frombits(uint32(t[7])<<16)
	}
	for lane, v := range x[i:] {
		p := v * math.Float32frombits(uint32(w[i+lane])<<16)
		switch lane {
		case 0:
			a0 += p
		case 1:
			a1 += p
		case 2:
			a2 += p
		case 3:
			a3 += p
		case 4:
			a4 += p
		case 5:
			a5 += p
		default:
			a6 += p
		}
	}
	return ((a0 + a1) + (a2 + a3)) + ((a4 + a5) + (a6 + a7))
}

// sum returns Σ x[i].
func sum(x []float32) float32 {
	n := len(x)
	var a0, a1, a2, a3, a4, a5, a6, a7 float32
	i := 0
	for ; i+8 <= n; i += 8 {
		s := x[i : i+8 : i+8]
		a0 += s[0]
		a1 += s[1]
		a2 += s[2]
		a3 += s[3]
		a4 += s[4]
		a5 += s[5]
		a6 += s[6]
		a7 += s[7]
	}
	for lane, v := range x[i:] {
		switch lane {
		case 0:
			a0 += v
		case 1:
			a1 += v
		case 2:
			a2 += v
		case 3:
			a3 += v
		case 4:
			a4 += v
		case 5:
			a5 += v
		default:
			a6 += v
		}
	}
	return ((a0 + a1) + (a2 + a3)) + ((a4 + a5) + (a6 + a7))
}

// sumSquares returns Σ x[i]².
func sumSquares(x []float32) float32 { return dot(x, x) }

// axpy does y[i] += a·x[i].
func axpy(a float32, x, y []float32) {
	y = y[:len(x)]
	for i, v := range x {
		y[i] += a * v
	}
}
