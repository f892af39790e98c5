package restmapping

// Len is the number of mappings held.
func (s *Mappings) Len() int { return s.len() }

// Loaded is the mapping the mapper keeps of the group, nil for none.
func (m *Mapper) Loaded(group string) any {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if g := m.groups[group]; g != nil {
		return g
	}
	return nil
}
