package shrink

// minPeak is the size below which a map is never copied: small tables cost
// less than the copy.
const minPeak = 256

// Map returns m, or a copy of it when it holds under a quarter of the most
// entries it held since the last copy (*peak, which Map keeps: call it
// after every insert and delete). Each copy follows at least three deletes
// per entry copied, so the cost per delete stays constant.
func Map[M ~map[K]V, K comparable, V any](m M, peak *int) M {
	n := len(m)
	if n > *peak {
		*peak = n
		return m
	}
	if *peak < minPeak || n >= *peak/4 {
		return m
	}
	c := make(M, n)
	for k, v := range m {
		c[k] = v
	}
	*peak = n
	return c
}
