// Package redisqtest starts the Redis transport's workers for a test: a
// worker started, and shut down when the test ends, in one call. (The
// transport's own tests, inside package redisq, cannot import it and keep
// their own.)
package redisqtest
