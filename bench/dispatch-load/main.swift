// dispatch-load: drives a running dispatch service over HTTP and reports what its users would feel.
// Everything lives in the other files, off the main actor (their threads call into it).
LoadTest.main()
