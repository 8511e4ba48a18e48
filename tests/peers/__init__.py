"""The retrieval clients of other projects, copied from their released code under their licences
(each module names the repository, commit, file and lines, and says what was changed), so that
the conformance tests send exactly the requests those clients send and read the answers exactly
as they read them. Nothing here is fetched at test time."""
