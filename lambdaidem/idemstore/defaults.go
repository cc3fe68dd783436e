package idemstore

import "time"

// DefaultGrace is how far past its end a lease must be before another
// claimer may take it over, to absorb clock skew between instances (the
// Grace of a claim, a commit, a release and a forget, unless the function
// sets another).
const DefaultGrace = 2 * time.Second

// MinResultBytes is the smallest result every Store must hold: under
// DynamoDB's 400 KB item limit with room for the record's other
// attributes.
const MinResultBytes = 350 * 1024
