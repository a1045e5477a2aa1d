package fib

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// The constraint language is the part of Python expressions constraints
// use: integer and float literals, True/False, names, parentheses, unary
// + - not, binary + - * / // % **, chained comparisons (== != < <= > >=),
// and/or, subscripts (x[-1]) and attribute calls (x[-1].item()). Names are
// axes, or inputs whose data a constraint may read (kv_indptr[-1]); a
// constraint that reads tensor data cannot be decided from axes alone.

// Limits on a constraint's size.
const (
	MaxExprLen   = 1000
	maxExprDepth = 64
)

// Expr is a parsed constraint.
type Expr struct {
	src  string
	root node
}

// String is the source text.
func (e *Expr) String() string { return e.src }

// Names lists every name the expression reads, in first-use order.
func (e *Expr) Names() []string {
	var out []string
	seen := map[string]bool{}
	var walk func(n node)
	walk = func(n node) {
		switch n := n.(type) {
		case nameNode:
			if !seen[string(n)] {
				seen[string(n)] = true
				out = append(out, string(n))
			}
		case *unaryNode:
			walk(n.x)
		case *binaryNode:
			walk(n.x)
			walk(n.y)
		case *compareNode:
			for _, o := range n.operands {
				walk(o)
			}
		case *indexNode:
			walk(n.x)
			walk(n.index)
		case *attrNode:
			walk(n.x)
		}
	}
	walk(e.root)
	return out
}

// ErrNeedsData is returned by Eval for an expression that reads a tensor's
// values (subscripts, .item()) or a name not in the environment of axis
// values; such a constraint is checked by whoever holds the data.
var ErrNeedsData = errors.New("needs tensor data")

type node any

type nameNode string

type numNode struct {
	v Value
}

type unaryNode struct {
	op string
	x  node
}

type binaryNode struct {
	op   string
	x, y node
}

type compareNode struct {
	ops      []string
	operands []node
}

type indexNode struct{ x, index node }

type attrNode struct {
	x    node
	name string
	call bool
}

// ParseExpr parses one constraint.
func ParseExpr(src string) (*Expr, error) {
	if len(src) > MaxExprLen {
		return nil, fmt.Errorf("longer than %d characters", MaxExprLen)
	}
	toks, err := lex(src)
	if err != nil {
		return nil, err
	}
	p := &parser{toks: toks}
	n, err := p.expr(0)
	if err != nil {
		return nil, err
	}
	if t := p.peek(); t.kind != tokEOF {
		return nil, fmt.Errorf("unexpected %q at column %d", t.text, t.pos+1)
	}
	return &Expr{src: src, root: n}, nil
}

type tokKind int

const (
	tokEOF tokKind = iota
	tokInt
	tokFloat
	tokName
	tokOp
)

type token struct {
	kind tokKind
	text string
	pos  int
}

// operators, longest first.
var operators = []string{"**", "//", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%", "<", ">", "(", ")", "[", "]", "."}

func lex(src string) ([]token, error) {
	var out []token
	for i := 0; i < len(src); {
		c := src[i]
		switch {
		case c == ' ' || c == '\t':
			i++
		case c >= '0' && c <= '9' || c == '.' && i+1 < len(src) && src[i+1] >= '0' && src[i+1] <= '9':
			j := i
			float := false
			for j < len(src) && (isDigit(src[j]) || src[j] == '_' || src[j] == '.' || src[j] == 'e' || src[j] == 'E' ||
				(src[j] == '-' || src[j] == '+') && (src[j-1] == 'e' || src[j-1] == 'E')) {
				if src[j] == '.' || src[j] == 'e' || src[j] == 'E' {
					float = true
				}
				j++
			}
			kind := tokInt
			if float {
				kind = tokFloat
			}
			out = append(out, token{kind, src[i:j], i})
			i = j
		case isNameStart(c):
			j := i
			for j < len(src) && (isNameStart(src[j]) || isDigit(src[j])) {
				j++
			}
			out = append(out, token{tokName, src[i:j], i})
			i = j
		default:
			matched := false
			for _, op := range operators {
				if strings.HasPrefix(src[i:], op) {
					out = append(out, token{tokOp, op, i})
					i += len(op)
					matched = true
					break
				}
			}
			if !matched {
				return nil, fmt.Errorf("unexpected character %q at column %d", c, i+1)
			}
		}
	}
	return append(out, token{tokEOF, "end of expression", len(src)}), nil
}

func isDigit(c byte) bool     { return c >= '0' && c <= '9' }
func isNameStart(c byte) bool { return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

type parser struct {
	toks  []token
	i     int
	depth int
}

func (p *parser) peek() token { return p.toks[p.i] }

func (p *parser) next() token {
	t := p.toks[p.i]
	if t.kind != tokEOF {
		p.i++
	}
	return t
}

func (p *parser) accept(kind tokKind, text string) bool {
	if t := p.peek(); t.kind == kind && t.text == text {
		p.i++
		return true
	}
	return false
}

// Precedence levels, lowest first: or, and, not, comparison, + -, * / // %,
// unary, ** (right-associative), postfix.
func (p *parser) expr(level int) (node, error) {
	p.depth++
	defer func() { p.depth-- }()
	if p.depth > maxExprDepth {
		return nil, fmt.Errorf("nested deeper than %d", maxExprDepth)
	}
	switch level {
	case 0, 1: // or, and
		word := []string{"or", "and"}[level]
		x, err := p.expr(level + 1)
		if err != nil {
			return nil, err
		}
		for p.accept(tokName, word) {
			y, err := p.expr(level + 1)
			if err != nil {
				return nil, err
			}
			x = &binaryNode{word, x, y}
		}
		return x, nil
	case 2: // not
		if p.accept(tokName, "not") {
			x, err := p.expr(2)
			if err != nil {
				return nil, err
			}
			return &unaryNode{"not", x}, nil
		}
		return p.expr(3)
	case 3: // comparisons, chained
		x, err := p.expr(4)
		if err != nil {
			return nil, err
		}
		c := &compareNode{operands: []node{x}}
		for {
			t := p.peek()
			if t.kind != tokOp || !isCompare(t.text) {
				break
			}
			p.next()
			y, err := p.expr(4)
			if err != nil {
				return nil, err
			}
			c.ops = append(c.ops, t.text)
			c.operands = append(c.operands, y)
		}
		if len(c.ops) == 0 {
			return x, nil
		}
		return c, nil
	case 4, 5: // + -, * / // %
		ops := [][]string{{"+", "-"}, {"*", "/", "//", "%"}}[level-4]
		x, err := p.expr(level + 1)
		if err != nil {
			return nil, err
		}
		for {
			t := p.peek()
			if t.kind != tokOp || !contains(ops, t.text) {
				return x, nil
			}
			p.next()
			y, err := p.expr(level + 1)
			if err != nil {
				return nil, err
			}
			x = &binaryNode{t.text, x, y}
		}
	case 6: // unary
		if t := p.peek(); t.kind == tokOp && (t.text == "-" || t.text == "+") {
			p.next()
			x, err := p.expr(6)
			if err != nil {
				return nil, err
			}
			return &unaryNode{t.text, x}, nil
		}
		x, err := p.postfix()
		if err != nil {
			return nil, err
		}
		if p.accept(tokOp, "**") {
			y, err := p.expr(6) // right-associative, binds tighter than unary on its left
			if err != nil {
				return nil, err
			}
			return &binaryNode{"**", x, y}, nil
		}
		return x, nil
	}
	return nil, errors.New("internal: bad precedence level")
}

func (p *parser) postfix() (node, error) {
	x, err := p.atom()
	if err != nil {
		return nil, err
	}
	for {
		switch {
		case p.accept(tokOp, "["):
			idx, err := p.expr(0)
			if err != nil {
				return nil, err
			}
			if !p.accept(tokOp, "]") {
				return nil, p.unexpected("]")
			}
			x = &indexNode{x, idx}
		case p.accept(tokOp, "."):
			t := p.next()
			if t.kind != tokName {
				return nil, fmt.Errorf("expected an attribute name at column %d", t.pos+1)
			}
			a := &attrNode{x: x, name: t.text}
			if p.accept(tokOp, "(") {
				if !p.accept(tokOp, ")") {
					return nil, p.unexpected(")")
				}
				a.call = true
			}
			x = a
		default:
			return x, nil
		}
	}
}

func (p *parser) atom() (node, error) {
	t := p.next()
	switch t.kind {
	case tokInt:
		i, err := strconv.ParseInt(strings.ReplaceAll(t.text, "_", ""), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("bad integer %q at column %d", t.text, t.pos+1)
		}
		return numNode{IntValue(i)}, nil
	case tokFloat:
		f, err := strconv.ParseFloat(strings.ReplaceAll(t.text, "_", ""), 64)
		if err != nil {
			return nil, fmt.Errorf("bad number %q at column %d", t.text, t.pos+1)
		}
		return numNode{FloatValue(f)}, nil
	case tokName:
		switch t.text {
		case "True":
			return numNode{BoolValue(true)}, nil
		case "False":
			return numNode{BoolValue(false)}, nil
		case "and", "or", "not", "in", "is", "if", "else", "lambda":
			return nil, fmt.Errorf("unexpected %q at column %d", t.text, t.pos+1)
		}
		return nameNode(t.text), nil
	case tokOp:
		if t.text == "(" {
			x, err := p.expr(0)
			if err != nil {
				return nil, err
			}
			if !p.accept(tokOp, ")") {
				return nil, p.unexpected(")")
			}
			return x, nil
		}
	}
	return nil, fmt.Errorf("unexpected %q at column %d", t.text, t.pos+1)
}

func (p *parser) unexpected(want string) error {
	t := p.peek()
	return fmt.Errorf("expected %q, found %q at column %d", want, t.text, t.pos+1)
}

func isCompare(s string) bool { return contains([]string{"==", "!=", "<", "<=", ">", ">="}, s) }

func contains(xs []string, s string) bool {
	return slices.Contains(xs, s)
}

// Value is an expression's value: an int, a float or a bool.
type Value struct {
	kind byte // 'i', 'f', 'b'
	i    int64
	f    float64
}

// IntValue, FloatValue and BoolValue build Values.
func IntValue(i int64) Value     { return Value{kind: 'i', i: i} }
func FloatValue(f float64) Value { return Value{kind: 'f', f: f} }
func BoolValue(b bool) Value {
	if b {
		return Value{kind: 'b', i: 1}
	}
	return Value{kind: 'b'}
}

// Truth is Python's truthiness.
func (v Value) Truth() bool {
	if v.kind == 'f' {
		return v.f != 0
	}
	return v.i != 0
}

func (v Value) float() float64 {
	if v.kind == 'f' {
		return v.f
	}
	return float64(v.i)
}

func (v Value) String() string {
	switch v.kind {
	case 'f':
		return strconv.FormatFloat(v.f, 'g', -1, 64)
	case 'b':
		if v.i != 0 {
			return "True"
		}
		return "False"
	}
	return strconv.FormatInt(v.i, 10)
}

// Eval evaluates the expression with the given axis values. It returns
// ErrNeedsData (wrapped) when the expression reads tensor data or a name
// env does not hold.
func (e *Expr) Eval(env map[string]int64) (Value, error) { return eval(e.root, env) }

var errOverflow = errors.New("integer overflow")

func eval(n node, env map[string]int64) (Value, error) {
	switch n := n.(type) {
	case numNode:
		return n.v, nil
	case nameNode:
		v, ok := env[string(n)]
		if !ok {
			return Value{}, fmt.Errorf("%w: %s", ErrNeedsData, string(n))
		}
		return IntValue(v), nil
	case *indexNode, *attrNode:
		return Value{}, fmt.Errorf("%w: reads tensor values", ErrNeedsData)
	case *unaryNode:
		x, err := eval(n.x, env)
		if err != nil {
			return Value{}, err
		}
		switch n.op {
		case "not":
			return BoolValue(!x.Truth()), nil
		case "+":
			return x, nil
		}
		if x.kind == 'f' {
			return FloatValue(-x.f), nil
		}
		if x.i == math.MinInt64 {
			return Value{}, errOverflow
		}
		return IntValue(-x.i), nil
	case *binaryNode:
		x, err := eval(n.x, env)
		if err != nil {
			return Value{}, err
		}
		switch n.op { // short-circuit like Python
		case "and":
			if !x.Truth() {
				return x, nil
			}
			return eval(n.y, env)
		case "or":
			if x.Truth() {
				return x, nil
			}
			return eval(n.y, env)
		}
		y, err := eval(n.y, env)
		if err != nil {
			return Value{}, err
		}
		return arith(n.op, x, y)
	case *compareNode:
		left, err := eval(n.operands[0], env)
		if err != nil {
			return Value{}, err
		}
		for i, op := range n.ops {
			right, err := eval(n.operands[i+1], env)
			if err != nil {
				return Value{}, err
			}
			if !compare(op, left, right) {
				return BoolValue(false), nil
			}
			left = right
		}
		return BoolValue(true), nil
	}
	return Value{}, errors.New("internal: unknown expression node")
}

func compare(op string, x, y Value) bool {
	var c int
	if x.kind != 'f' && y.kind != 'f' {
		c = cmp.Compare(x.i, y.i)
	} else {
		a, b := x.float(), y.float()
		switch {
		case math.IsNaN(a) || math.IsNaN(b):
			return op == "!="
		case a < b:
			c = -1
		case a > b:
			c = 1
		}
	}
	switch op {
	case "==":
		return c == 0
	case "!=":
		return c != 0
	case "<":
		return c < 0
	case "<=":
		return c <= 0
	case ">":
		return c > 0
	}
	return c >= 0
}

func arith(op string, x, y Value) (Value, error) {
	if op == "/" {
		if y.float() == 0 {
			return Value{}, errors.New("division by zero")
		}
		return FloatValue(x.float() / y.float()), nil
	}
	if x.kind == 'f' || y.kind == 'f' {
		a, b := x.float(), y.float()
		switch op {
		case "+":
			return FloatValue(a + b), nil
		case "-":
			return FloatValue(a - b), nil
		case "*":
			return FloatValue(a * b), nil
		case "**":
			return FloatValue(math.Pow(a, b)), nil
		}
		if b == 0 {
			return Value{}, errors.New("division by zero")
		}
		q := math.Floor(a / b)
		if op == "//" {
			return FloatValue(q), nil
		}
		return FloatValue(a - q*b), nil
	}
	a, b := x.i, y.i
	switch op {
	case "+":
		s := a + b
		if (s > a) != (b > 0) {
			return Value{}, errOverflow
		}
		return IntValue(s), nil
	case "-":
		d := a - b
		if (d < a) != (b > 0) {
			return Value{}, errOverflow
		}
		return IntValue(d), nil
	case "*":
		if a != 0 && b != 0 {
			p := a * b
			if p/b != a || (a == -1 && b == math.MinInt64) || (b == -1 && a == math.MinInt64) {
				return Value{}, errOverflow
			}
			return IntValue(p), nil
		}
		return IntValue(0), nil
	case "//", "%":
		if b == 0 {
			return Value{}, errors.New("division by zero")
		}
		if a == math.MinInt64 && b == -1 {
			return Value{}, errOverflow
		}
		q, r := a/b, a%b
		if r != 0 && (r < 0) != (b < 0) { // Python floors
			q--
			r += b
		}
		if op == "//" {
			return IntValue(q), nil
		}
		return IntValue(r), nil
	case "**":
		if b < 0 {
			return FloatValue(math.Pow(float64(a), float64(b))), nil
		}
		switch {
		case b == 0:
			return IntValue(1), nil
		case a == 0 || a == 1 || b == 1:
			return IntValue(a), nil
		case a == -1:
			return IntValue(1 - 2*(b%2)), nil
		case a == math.MinInt64:
			return Value{}, errOverflow
		}
		r := int64(1) // |a| >= 2: at most 63 steps before overflow
		for range b {
			if abs64(r) > math.MaxInt64/abs64(a) {
				return Value{}, errOverflow
			}
			r *= a
		}
		return IntValue(r), nil
	}
	return Value{}, fmt.Errorf("internal: unknown operator %q", op)
}

func abs64(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}
