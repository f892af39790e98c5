// Package hubobject holds what bounds an object Vidra writes to the hub.
package hubobject

// Limit is the most an object on the hub may hold, in bytes: etcd's default request
// limit (--max-request-bytes, 1.5 MiB), which managed control planes keep too. A write
// past it is refused whole.
const Limit = 3 << 19
