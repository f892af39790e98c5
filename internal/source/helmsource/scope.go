package helmsource

// Scope tells apart, within this client's process, the ways src may reach its charts
// (credentials, trusted CA, plain HTTP), without holding any of them: what is fetched
// or built with one is never handed to a caller with another.
func (c *Client) Scope(src Source) string { return c.credKey(src) }
