// Package ordered holds the ordered sets the scheduler and the server's indexes are built
// on: a treap for small sets that change often (active attempts in victim order), and a
// B-tree with counts for large ones (a share's queue of a million jobs, a queue's jobs by
// status). Both keep items in the order of a key taken from each item; neither is safe for
// concurrent use.
package ordered

// BTree is an ordered set like Treap, laid out for a large queue: each node holds up to
// btreeMax keys inline, in the node itself, so a step down the tree is one pointer and a
// binary search within a few cache lines, and an operation on a share's queue of a
// million jobs touches a handful of nodes instead of twenty-odd scattered ones. Only keys
// are stored; the item is read back from its key (itemOf), so the queue's key, which
// holds its job, is not stored twice. Internal nodes keep each child's lower bound and
// item count (for Rank). Nodes that fall below a quarter full are merged with a neighbour
// when the two fit in one.
type BTree[K, T any] struct {
	root   *bnode[K]
	cmp    func(a, b K) int
	keyOf  func(T) K
	itemOf func(K) T
	size   int
}

const btreeMax = 32

type bnode[K any] struct {
	n    int                // keys in a leaf, children in an internal node
	kids *[btreeMax]bkid[K] // nil in a leaf; next to n, in the node's first cache line
	// keys: a leaf's items in order; in an internal node keys[i] bounds child i from
	// below (keys[0] bounds the node).
	keys [btreeMax]K
}

type bkid[K any] struct {
	node  *bnode[K]
	count int // items under node
}

func NewBTree[K, T any](keyOf func(T) K, itemOf func(K) T, cmp func(a, b K) int) *BTree[K, T] {
	return &BTree[K, T]{cmp: cmp, keyOf: keyOf, itemOf: itemOf, root: &bnode[K]{}}
}

func (n *bnode[K]) leaf() bool { return n.kids == nil }

func (n *bnode[K]) count() int {
	if n.leaf() {
		return n.n
	}
	c := 0
	for _, k := range n.kids[:n.n] {
		c += k.count
	}
	return c
}

// search returns the first index in a leaf whose key is >= key, and whether it is equal.
func (t *BTree[K, T]) search(n *bnode[K], key K) (int, bool) {
	lo, hi := 0, n.n
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if t.cmp(n.keys[m], key) < 0 {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo, lo < n.n && t.cmp(n.keys[lo], key) == 0
}

// child returns the index of the child of internal node n whose range holds key.
func (t *BTree[K, T]) child(n *bnode[K], key K) int {
	lo, hi := 1, n.n
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if t.cmp(n.keys[m], key) <= 0 {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo - 1
}

// Len returns the number of items.
func (t *BTree[K, T]) Len() int { return t.size }

// Insert adds item; an item whose key equals one present is a caller bug.
func (t *BTree[K, T]) Insert(item T) {
	if right := t.insert(t.root, t.keyOf(item)); right != nil {
		old := t.root
		t.root = &bnode[K]{n: 2, kids: new([btreeMax]bkid[K])}
		t.root.keys[0], t.root.keys[1] = old.keys[0], right.keys[0]
		t.root.kids[0] = bkid[K]{old, old.count()}
		t.root.kids[1] = bkid[K]{right, right.count()}
	}
	t.size++
}

// split moves the upper half of full node n into a new right sibling and returns it,
// before an insert at position at. An insert at the very end (a new job behind all others
// of the lowest priority, the common case) leaves n full and the sibling empty, so a
// queue that grows at the back packs its leaves.
func (t *BTree[K, T]) split(n *bnode[K], at int) *bnode[K] {
	h := btreeMax / 2
	if at == btreeMax {
		h = btreeMax
	}
	r := &bnode[K]{n: n.n - h}
	copy(r.keys[:], n.keys[h:n.n])
	clear(n.keys[h:n.n]) // drop the references the left half no longer holds
	if !n.leaf() {
		r.kids = new([btreeMax]bkid[K])
		copy(r.kids[:], n.kids[h:n.n])
		clear(n.kids[h:n.n])
	}
	n.n = h
	return r
}

// put inserts key (and, in an internal node, its child) at position i of n, which has
// room.
func (n *bnode[K]) put(i int, key K, kid bkid[K]) {
	copy(n.keys[i+1:n.n+1], n.keys[i:n.n])
	n.keys[i] = key
	if !n.leaf() {
		copy(n.kids[i+1:n.n+1], n.kids[i:n.n])
		n.kids[i] = kid
	}
	n.n++
}

// insert adds key under n and returns n's new right sibling if n had to split.
func (t *BTree[K, T]) insert(n *bnode[K], key K) *bnode[K] {
	if n.leaf() {
		i, _ := t.search(n, key)
		return t.add(n, i, key, bkid[K]{})
	}
	i := t.child(n, key)
	n.kids[i].count++
	r := t.insert(n.kids[i].node, key)
	if r == nil {
		return nil
	}
	n.kids[i].count -= r.count()
	return t.add(n, i+1, r.keys[0], bkid[K]{r, r.count()})
}

// add puts key (and kid) at position i of n, splitting n first if it is full; it returns
// the new right sibling, if any.
func (t *BTree[K, T]) add(n *bnode[K], i int, key K, kid bkid[K]) *bnode[K] {
	if n.n < btreeMax {
		n.put(i, key, kid)
		return nil
	}
	r := t.split(n, i)
	if i <= n.n && n.n < btreeMax {
		n.put(i, key, kid)
	} else {
		r.put(i-n.n, key, kid)
	}
	return r
}

// Delete removes the item whose key equals item's and reports whether it was there.
func (t *BTree[K, T]) Delete(item T) bool {
	if !t.delete(t.root, t.keyOf(item)) {
		return false
	}
	t.size--
	t.shrink()
	return true
}

// shrink drops root levels left with one child, after a delete.
func (t *BTree[K, T]) shrink() {
	for !t.root.leaf() && t.root.n == 1 {
		t.root = t.root.kids[0].node
	}
	if !t.root.leaf() && t.root.n == 0 {
		t.root = &bnode[K]{}
	}
}

func (t *BTree[K, T]) delete(n *bnode[K], key K) bool {
	if n.leaf() {
		i, found := t.search(n, key)
		if !found {
			return false
		}
		n.cut(i)
		return true
	}
	i := t.child(n, key)
	if !t.delete(n.kids[i].node, key) {
		return false
	}
	n.kids[i].count--
	c := n.kids[i].node
	switch {
	case n.kids[i].count == 0:
		n.cut(i)
	case c.n < btreeMax/4:
		if i+1 < n.n && c.n+n.kids[i+1].node.n <= btreeMax {
			n.mergeRight(i)
		} else if i > 0 && c.n+n.kids[i-1].node.n <= btreeMax {
			n.mergeRight(i - 1)
		}
	}
	return true
}

// cut removes position i of n (a leaf's key, or an internal node's child).
func (n *bnode[K]) cut(i int) {
	copy(n.keys[i:], n.keys[i+1:n.n])
	var zero K
	n.keys[n.n-1] = zero
	if !n.leaf() {
		copy(n.kids[i:], n.kids[i+1:n.n])
		n.kids[n.n-1] = bkid[K]{}
	}
	n.n--
}

// mergeRight moves child i+1 of n into child i.
func (n *bnode[K]) mergeRight(i int) {
	l, r := n.kids[i].node, n.kids[i+1].node
	copy(l.keys[l.n:], r.keys[:r.n])
	if !l.leaf() {
		copy(l.kids[l.n:], r.kids[:r.n])
	}
	l.n += r.n
	n.kids[i].count += n.kids[i+1].count
	n.cut(i + 1)
}

// Min returns the smallest item.
func (t *BTree[K, T]) Min() (T, bool) {
	n := t.root
	for !n.leaf() {
		n = n.kids[0].node
	}
	if n.n == 0 {
		var zero T
		return zero, false
	}
	return t.itemOf(n.keys[0]), true
}

// After returns the smallest item greater than item.
func (t *BTree[K, T]) After(item T) (T, bool) {
	var next T
	found := false
	t.AscendAfter(item, func(x T) bool { next, found = x, true; return false })
	return next, found
}

// AscendAfter calls fn on the items greater than item, in order, until fn returns false.
func (t *BTree[K, T]) AscendAfter(item T, fn func(T) bool) {
	t.ascendAfter(t.root, t.keyOf(item), fn)
}

func (t *BTree[K, T]) ascendAfter(n *bnode[K], key K, fn func(T) bool) bool {
	if n.leaf() {
		i, found := t.search(n, key)
		if found {
			i++
		}
		return t.each(n.keys[i:n.n], fn)
	}
	for i := t.child(n, key); i < n.n; i++ {
		if !t.ascendAfter(n.kids[i].node, key, fn) {
			return false
		}
	}
	return true
}

func (t *BTree[K, T]) each(keys []K, fn func(T) bool) bool {
	for _, k := range keys {
		if !fn(t.itemOf(k)) {
			return false
		}
	}
	return true
}

// Ascend calls fn on the items in order until fn returns false.
func (t *BTree[K, T]) Ascend(fn func(T) bool) { t.ascend(t.root, fn) }

func (t *BTree[K, T]) ascend(n *bnode[K], fn func(T) bool) bool {
	if n.leaf() {
		return t.each(n.keys[:n.n], fn)
	}
	for _, k := range n.kids[:n.n] {
		if !t.ascend(k.node, fn) {
			return false
		}
	}
	return true
}

// Rank returns how many items are less than item.
func (t *BTree[K, T]) Rank(item T) int {
	key := t.keyOf(item)
	r := 0
	n := t.root
	for !n.leaf() {
		i := t.child(n, key)
		for _, k := range n.kids[:i] {
			r += k.count
		}
		n = n.kids[i].node
	}
	i, _ := t.search(n, key)
	return r + i
}

// AscendKey calls fn on the items whose key is greater than key, in order, until fn
// returns false; it reports whether fn never did.
func (t *BTree[K, T]) AscendKey(key K, fn func(T) bool) bool { return t.ascendAfter(t.root, key, fn) }

// All calls fn on every item in order until fn returns false; it reports whether fn
// never did.
func (t *BTree[K, T]) All(fn func(T) bool) bool { return t.ascend(t.root, fn) }

// DescendKey calls fn on the items whose key is at most key, greatest first, until fn
// returns false; it reports whether fn never did.
func (t *BTree[K, T]) DescendKey(key K, fn func(T) bool) bool { return t.descendTo(t.root, key, fn) }

func (t *BTree[K, T]) descendTo(n *bnode[K], key K, fn func(T) bool) bool {
	if n.leaf() {
		i, found := t.search(n, key)
		if found {
			i++
		}
		for j := i - 1; j >= 0; j-- {
			if !fn(t.itemOf(n.keys[j])) {
				return false
			}
		}
		return true
	}
	for i := t.child(n, key); i >= 0; i-- {
		if !t.descendTo(n.kids[i].node, key, fn) {
			return false
		}
	}
	return true
}

// Descend calls fn on every item, greatest first, until fn returns false; it reports
// whether fn never did.
func (t *BTree[K, T]) Descend(fn func(T) bool) bool { return t.descend(t.root, fn) }

func (t *BTree[K, T]) descend(n *bnode[K], fn func(T) bool) bool {
	if n.leaf() {
		for j := n.n - 1; j >= 0; j-- {
			if !fn(t.itemOf(n.keys[j])) {
				return false
			}
		}
		return true
	}
	for i := n.n - 1; i >= 0; i-- {
		if !t.descend(n.kids[i].node, fn) {
			return false
		}
	}
	return true
}
