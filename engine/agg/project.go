package agg

import (
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/mayflydb/mayfly/engine/expr"
	"github.com/mayflydb/mayfly/internal/bsonx"
	"github.com/mayflydb/mayfly/internal/mongoerr"
)

// projection is a parsed $project / $addFields / $unset specification as a
// tree of field names. Leaves either include, exclude, or compute a value.
type projection struct {
	root      *projNode
	exclusion bool // exclusion projection ($unset, {a: 0})
	addFields bool // $addFields/$set: keep everything, set computed fields
}

type projNode struct {
	order    []string
	children map[string]*projNode
	include  bool
	exclude  bool
	expr     expr.Expr // computed leaf
}

func newNode() *projNode { return &projNode{children: map[string]*projNode{}} }

func (n *projNode) isLeaf() bool { return n.include || n.exclude || n.expr != nil }

func (n *projNode) hasComputed() bool {
	if n.expr != nil {
		return true
	}
	for _, c := range n.children {
		if c.hasComputed() {
			return true
		}
	}
	return false
}

func (n *projNode) hasInclude() bool {
	if n.include {
		return true
	}
	for _, c := range n.children {
		if c.hasInclude() {
			return true
		}
	}
	return false
}

// child returns the node for a dotted path, creating it; collisions (a
// path under a leaf, or a leaf over a subtree) fail with 31250.
func (n *projNode) child(path []string, full string) (*projNode, error) {
	cur := n
	for i, p := range path {
		c, ok := cur.children[p]
		if !ok {
			c = newNode()
			cur.children[p] = c
			cur.order = append(cur.order, p)
		} else if c.isLeaf() || i == len(path)-1 {
			return nil, mongoerr.New(31250, "Invalid $project :: caused by :: Path collision at %s", full)
		}
		cur = c
	}
	return cur, nil
}

func isOperatorDoc(v any) bool {
	d, ok := v.(bson.D)
	return ok && len(d) > 0 && strings.HasPrefix(d[0].Key, "$")
}

func validatePath(stage, p string) error {
	if p == "" {
		return mongoerr.New(40352, "Invalid %s :: caused by :: FieldPath cannot be constructed with empty string", stage)
	}
	for _, part := range strings.Split(p, ".") {
		if part == "" {
			return mongoerr.New(40353, "Invalid %s :: caused by :: FieldPath must not end with a '.'.", stage)
		}
		if strings.HasPrefix(part, "$") {
			return mongoerr.New(16410, "Invalid %s :: caused by :: FieldPath field names may not start with '$'. Consider using $getField or $setField.", stage)
		}
	}
	return nil
}

// parseProjection parses a $project (addFields=false) or $addFields spec.
func parseProjection(stageName string, spec bson.D, addFields bool, opts *Options) (*projection, error) {
	if len(spec) == 0 && !addFields {
		return nil, mongoerr.New(51272, "Invalid %s :: caused by :: projection specification must have at least one field", stageName)
	}
	p := &projection{root: newNode(), addFields: addFields}
	mode := 0 // 1 inclusion, -1 exclusion
	idSeen := false
	var walk func(prefix []string, d bson.D) error
	walk = func(prefix []string, d bson.D) error {
		for _, e := range d {
			if err := validatePath(stageName, e.Key); err != nil {
				return err
			}
			path := append(append([]string{}, prefix...), strings.Split(e.Key, ".")...)
			full := strings.Join(path, ".")
			isID := full == "_id"
			if isID {
				idSeen = true
			}
			if sub, ok := e.Value.(bson.D); ok && !isOperatorDoc(sub) {
				if len(sub) == 0 {
					if addFields {
						n, err := p.root.child(path, full)
						if err != nil {
							return err
						}
						n.expr, _ = expr.Compile(bson.D{})
						continue
					}
					return mongoerr.New(51270, "Invalid %s :: caused by :: An empty sub-projection is not a valid value. Found empty object at path", stageName)
				}
				if err := walk(path, sub); err != nil {
					return err
				}
				continue
			}
			n, err := p.root.child(path, full)
			if err != nil {
				return err
			}
			if !addFields {
				switch v := e.Value.(type) {
				case bool, int32, int64, float64, bson.Decimal128:
					if expr.Truthy(v) {
						if mode == -1 {
							return mongoerr.New(31253, "Invalid %s :: caused by :: Cannot do inclusion on field %s in exclusion projection", stageName, full)
						}
						n.include = true
						mode = 1
					} else {
						if mode == 1 && !isID {
							return mongoerr.New(31254, "Invalid %s :: caused by :: Cannot do exclusion on field %s in inclusion projection", stageName, full)
						}
						n.exclude = true
						if !isID {
							mode = -1
						}
					}
					continue
				}
				if mode == -1 {
					return mongoerr.New(31252, "Invalid %s :: caused by :: Cannot use expression other than $meta in exclusion projection", stageName)
				}
				mode = 1
			}
			c, err := compileExpr(e.Value, opts)
			if err != nil {
				return err
			}
			n.expr = c
		}
		return nil
	}
	if err := walk(nil, spec); err != nil {
		return nil, err
	}
	if addFields {
		return p, nil
	}
	if mode == -1 || (mode == 0 && idSeen) {
		p.exclusion = true
		// {_id: 0} alone is an exclusion projection
		return p, nil
	}
	if _, has := p.root.children["_id"]; !has {
		// _id is included by default in inclusion projections
		n := newNode()
		n.include = true
		p.root.children["_id"] = n
		p.root.order = append([]string{"_id"}, p.root.order...)
	}
	// An exclusion of _id inside an inclusion projection must be checked
	// again now that the mode is known (31254 for non-_id exclusions).
	var check func(n *projNode, path string) error
	check = func(n *projNode, path string) error {
		for _, k := range n.order {
			c := n.children[k]
			full := k
			if path != "" {
				full = path + "." + k
			}
			if c.exclude && full != "_id" {
				return mongoerr.New(31254, "Invalid %s :: caused by :: Cannot do exclusion on field %s in inclusion projection", stageName, full)
			}
			if err := check(c, full); err != nil {
				return err
			}
		}
		return nil
	}
	if err := check(p.root, ""); err != nil {
		return nil, err
	}
	return p, nil
}

func (p *projection) apply(doc bson.D, env *expr.Env) (bson.D, error) {
	switch {
	case p.addFields:
		// copy-on-write: computeInto copies each sub-document it changes
		return applyComputed(p.root, append(make(bson.D, 0, len(doc)+len(p.root.order)), doc...), env, true)
	case p.exclusion:
		return applyExclusion(p.root, doc), nil
	}
	out := applyInclusion(p.root, doc)
	out, err := applyComputed(p.root, out, env, false)
	if err != nil {
		return nil, err
	}
	// _id always leads an inclusion projection's output, even computed
	for i, e := range out {
		if e.Key == "_id" && i > 0 {
			copy(out[1:i+1], out[:i])
			out[0] = e
			break
		}
	}
	return out, nil
}

func applyExclusion(n *projNode, doc bson.D) bson.D {
	out := make(bson.D, 0, len(doc))
	for _, e := range doc {
		c, ok := n.children[e.Key]
		if !ok {
			out = append(out, e)
			continue
		}
		if c.exclude {
			continue
		}
		out = append(out, bson.E{Key: e.Key, Value: excludeValue(c, e.Value)})
	}
	return out
}

func excludeValue(n *projNode, v any) any {
	switch x := v.(type) {
	case bson.D:
		return applyExclusion(n, x)
	case bson.A:
		out := make(bson.A, len(x))
		for i, el := range x {
			out[i] = excludeValue(n, el)
		}
		return out
	}
	return v
}

// applyInclusion keeps the included fields in document order.
func applyInclusion(n *projNode, doc bson.D) bson.D {
	out := make(bson.D, 0, len(n.children))
	for _, e := range doc {
		c, ok := n.children[e.Key]
		if !ok || c.exclude || c.expr != nil {
			continue
		}
		if c.include {
			out = append(out, e)
			continue
		}
		if !c.hasInclude() {
			continue
		}
		if v, keep := includeValue(c, e.Value); keep {
			out = append(out, bson.E{Key: e.Key, Value: v})
		}
	}
	return out
}

func includeValue(n *projNode, v any) (any, bool) {
	switch x := v.(type) {
	case bson.D:
		return applyInclusion(n, x), true
	case bson.A:
		out := bson.A{}
		for _, el := range x {
			if r, keep := includeValue(n, el); keep {
				out = append(out, r)
			}
		}
		return out, true
	}
	return nil, false
}

// applyComputed sets computed fields into doc (in spec order). For
// $addFields an existing field is replaced in place; a Missing result
// removes the field.
func applyComputed(n *projNode, doc bson.D, env *expr.Env, addFields bool) (bson.D, error) {
	for _, k := range n.order {
		c := n.children[k]
		if !c.hasComputed() {
			continue
		}
		if c.expr != nil {
			v, err := c.expr.Eval(env)
			if err != nil {
				return nil, err
			}
			if bsonx.IsMissing(v) {
				doc = bsonx.Delete(doc, k)
				continue
			}
			doc = bsonx.Set(doc, k, v)
			continue
		}
		cur, _ := bsonx.Get(doc, k)
		nv, err := computeInto(c, cur, env, addFields)
		if err != nil {
			return nil, err
		}
		doc = bsonx.Set(doc, k, nv)
	}
	return doc, nil
}

func computeInto(n *projNode, cur any, env *expr.Env, addFields bool) (any, error) {
	switch x := cur.(type) {
	case bson.D:
		return applyComputed(n, append(make(bson.D, 0, len(x)+len(n.order)), x...), env, addFields)
	case bson.A:
		out := make(bson.A, len(x))
		for i, el := range x {
			r, err := computeInto(n, el, env, addFields)
			if err != nil {
				return nil, err
			}
			out[i] = r
		}
		return out, nil
	}
	return applyComputed(n, bson.D{}, env, addFields)
}
