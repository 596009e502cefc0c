package expr

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/checker"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
)

// MaxCost is the most an expression may cost per evaluation (cel-go's runtime cost units, about
// one per step): the limit Kubernetes gives one CRD validation rule.
const MaxCost = 1_000_000

// MaxValueSize is the largest list (elements) or string (bytes) a function may build. cel-go
// charges a call for the size of its result only after building it, so `lists.range(100000000)`
// allocated gigabytes before the cost limit stopped it; the functions below refuse first.
const MaxValueSize = 1 << 20

// errTooLarge is the message of a refused allocation; isCostOverrun recognises it.
const errTooLarge = "would build a value over the size limit"

// boundedFunctions redefine the extension functions whose result can be far larger than their
// inputs (cel-go lets an overload be redefined with the same signature; the later one wins).
var boundedFunctions = []cel.EnvOption{
	cel.Function("lists.range",
		cel.Overload("lists_range", []*cel.Type{cel.IntType}, cel.ListType(cel.IntType),
			cel.UnaryBinding(func(n ref.Val) ref.Val {
				size := int64(n.(types.Int))
				if size > MaxValueSize {
					return tooLarge("lists.range(%d)", size)
				}
				out := make([]ref.Val, 0, max(size, 0))
				for i := range size {
					out = append(out, types.Int(i))
				}
				return types.DefaultTypeAdapter.NativeToValue(out)
			}))),
	cel.Function("replace",
		cel.MemberOverload("string_replace_string_string", []*cel.Type{cel.StringType, cel.StringType, cel.StringType}, cel.StringType,
			cel.FunctionBinding(func(args ...ref.Val) ref.Val {
				return boundedReplace(args[0], args[1], args[2], -1)
			})),
		cel.MemberOverload("string_replace_string_string_int", []*cel.Type{cel.StringType, cel.StringType, cel.StringType, cel.IntType}, cel.StringType,
			cel.FunctionBinding(func(args ...ref.Val) ref.Val {
				return boundedReplace(args[0], args[1], args[2], int64(args[3].(types.Int)))
			}))),
	cel.Function("join",
		cel.MemberOverload("list_join", []*cel.Type{cel.ListType(cel.StringType)}, cel.StringType,
			cel.UnaryBinding(func(list ref.Val) ref.Val { return boundedJoin(list, "") })),
		cel.MemberOverload("list_join_string", []*cel.Type{cel.ListType(cel.StringType), cel.StringType}, cel.StringType,
			cel.BinaryBinding(func(list, sep ref.Val) ref.Val { return boundedJoin(list, string(sep.(types.String))) }))),
	// Quadratic in their inputs, and charged only afterwards: refused first when the work is over the limit.
	cel.Function("distinct",
		cel.MemberOverload("list_distinct", []*cel.Type{anyList}, anyList,
			cel.UnaryBinding(func(list ref.Val) ref.Val { return boundedDistinct(list.(traits.Lister)) }))),
	cel.Function("sets.contains",
		cel.Overload("list_sets_contains_list", []*cel.Type{anyList, anyList}, cel.BoolType,
			cel.BinaryBinding(func(a, b ref.Val) ref.Val { return boundedSets("sets.contains", a, b, setsContains) }))),
	cel.Function("sets.equivalent",
		cel.Overload("list_sets_equivalent_list", []*cel.Type{anyList, anyList}, cel.BoolType,
			cel.BinaryBinding(func(a, b ref.Val) ref.Val {
				return boundedSets("sets.equivalent", a, b, func(x, y traits.Lister) ref.Val {
					if r := setsContains(x, y); r != types.True {
						return r
					}
					return setsContains(y, x)
				})
			}))),
	cel.Function("sets.intersects",
		cel.Overload("list_sets_intersects_list", []*cel.Type{anyList, anyList}, cel.BoolType,
			cel.BinaryBinding(func(a, b ref.Val) ref.Val { return boundedSets("sets.intersects", a, b, setsIntersects) }))),
}

var anyList = cel.ListType(cel.TypeParamType("T"))

// quadratic refuses work of n*m comparisons over the cost limit.
func quadratic(what string, n, m int64) ref.Val {
	if n*m > MaxCost {
		return types.NewErr("%s of %d by %d elements %s (%d)", what, n, m, errTooLarge, MaxCost)
	}
	return nil
}

func boundedDistinct(l traits.Lister) ref.Val {
	n := int64(l.Size().(types.Int))
	if err := quadratic("distinct()", n, n); err != nil {
		return err
	}
	var out []ref.Val
	for i := range n {
		v := l.Get(types.Int(i))
		seen := false
		for _, o := range out {
			if v.Equal(o) == types.True {
				seen = true
				break
			}
		}
		if !seen {
			out = append(out, v)
		}
	}
	return types.DefaultTypeAdapter.NativeToValue(out)
}

func boundedSets(what string, a, b ref.Val, f func(x, y traits.Lister) ref.Val) ref.Val {
	x, y := a.(traits.Lister), b.(traits.Lister)
	if err := quadratic(what, int64(x.Size().(types.Int)), int64(y.Size().(types.Int))); err != nil {
		return err
	}
	return f(x, y)
}

// setsContains: every element of sub is in l (ext.Sets' sets.contains).
func setsContains(l, sub traits.Lister) ref.Val {
	for it := sub.Iterator(); it.HasNext() == types.True; {
		if r := l.Contains(it.Next()); r != types.True {
			return r
		}
	}
	return types.True
}

// setsIntersects: some element of a is in b (ext.Sets' sets.intersects).
func setsIntersects(a, b traits.Lister) ref.Val {
	for it := a.Iterator(); it.HasNext() == types.True; {
		if b.Contains(it.Next()) == types.True {
			return types.True
		}
	}
	return types.False
}

func tooLarge(format string, args ...any) ref.Val {
	return types.NewErr("%s %s (%d)", fmt.Sprintf(format, args...), errTooLarge, MaxValueSize)
}

// boundedReplace is ext.Strings' replace, refused when its result would be over MaxValueSize.
func boundedReplace(str, old, repl ref.Val, n int64) ref.Val {
	s, o, r := string(str.(types.String)), string(old.(types.String)), string(repl.(types.String))
	count := int64(strings.Count(s, o))
	if n >= 0 && n < count {
		count = n
	}
	if size := int64(len(s)) + count*(int64(len(r))-int64(len(o))); size > MaxValueSize {
		return tooLarge("replace() of %d occurrences", count)
	}
	out := strings.Replace(s, o, r, int(max(min(n, int64(len(s))+1), -1)))
	if !utf8.ValidString(out) {
		return types.NewErr("replace() built an invalid UTF-8 string")
	}
	return types.String(out)
}

// boundedJoin is ext.Strings' join, refused when its result would be over MaxValueSize.
func boundedJoin(list ref.Val, sep string) ref.Val {
	l := list.(traits.Lister)
	n := int64(l.Size().(types.Int))
	parts := make([]string, 0, n)
	size := int64(0)
	for i := range n {
		s, ok := l.Get(types.Int(i)).(types.String)
		if !ok {
			return types.NewErr("join: %v is not a string", l.Get(types.Int(i)).Type())
		}
		if size += int64(len(s)) + int64(len(sep)); size > MaxValueSize {
			return tooLarge("join() of %d strings", n)
		}
		parts = append(parts, string(s))
	}
	return types.String(strings.Join(parts, sep))
}

// chargeForSize makes every call that returns a string, bytes, a list or a map cost for the
// value it built, as cel-go already does for its list functions: a string a tenth of a step per
// character, a list or map a step per element. Without it `lowerAscii`, `replace`, `split`, list
// `+` and the like cost one step whatever they allocate, and a comprehension could build
// gigabytes within the step limit. Calls returning anything else keep cel-go's own costs.
type chargeForSize struct{}

func (chargeForSize) CallCost(_, _ string, _ []ref.Val, result ref.Val) *uint64 {
	var cost uint64
	switch v := result.(type) {
	case types.String:
		cost = 1 + uint64(len(v))/10
	case types.Bytes:
		cost = 1 + uint64(len(v))/10
	case traits.Sizer:
		cost = 1 + uint64(v.Size().(types.Int))
	default:
		return nil
	}
	return &cost
}

// isCostOverrun reports whether an evaluation error is the cost limit or a refused allocation.
func isCostOverrun(err error) bool {
	return err != nil && (strings.Contains(err.Error(), "cost limit exceeded") || strings.Contains(err.Error(), errTooLarge))
}

// unknownSizes gives the cost estimator no sizes: only what the expression fixes by itself
// (`lists.range(100000000)`) raises its minimum cost, so an expression over the object is never
// refused for what a large object could cost.
type unknownSizes struct{}

func (unknownSizes) EstimateSize(checker.AstNode) *checker.SizeEstimate { return nil }
func (unknownSizes) EstimateCallCost(string, string, *checker.AstNode, []checker.AstNode) *checker.CallEstimate {
	return nil
}
