package httpidem

// StoreKey exposes the stored key layout to the tests, which plant records
// directly in the store.
var StoreKey = storeKey
