package platform

// IdentityGeneration is how many identity changes subscribers have been
// told of, for tests of when they are told.
func IdentityGeneration(s *Service) uint64 { return s.subs.identityGen.Load() }
