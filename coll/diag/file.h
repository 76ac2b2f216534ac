/*
 * The files of coll/diag (traces, flight recorder dumps), written whole under
 * a private temporary name and renamed into place, so that a reader never
 * sees half a file and nobody else can make weft write somewhere else.
 *
 * The folders these files go to are the user's choice and may be shared
 * (/tmp): another user can plant names there in advance. So the temporary is
 * "<folder>/.<name>.<16 random hex digits>.tmp", created with
 * O_CREAT | O_EXCL | O_NOFOLLOW and mode 0600: a name planted before (a
 * symbolic link to a file of the user's, a file another user owns and can
 * read) makes the creation fail instead of being followed or reused, and the
 * random part (getrandom) means one cannot be planted for the next write.
 * rename() replaces a link at the final name, never follows it; in a sticky
 * folder it refuses to replace another user's file (EPERM), and that write
 * fails, reported.
 *
 * Threading: any thread; the functions keep no state.
 */
#ifndef WEFT_COLL_DIAG_FILE_H
#define WEFT_COLL_DIAG_FILE_H

#include <stddef.h>
#include <stdio.h>

/* Create the private temporary for path and name it in tmp (len bytes; len
 * >= strlen(path) + 32 is enough). Returns a stream open for writing, or NULL
 * with errno set (ENAMETOOLONG: tmp is too small). */
FILE *weft__diag_file_create(const char *path, char *tmp, size_t len);

/* Close f (from weft__diag_file_create) and rename tmp onto path. Returns 0,
 * or -1 with errno set (a write error of f included); on failure tmp is
 * removed. */
int weft__diag_file_commit(FILE *f, const char *tmp, const char *path);

/* Close f and remove tmp: the caller gives up on the file. */
void weft__diag_file_discard(FILE *f, const char *tmp);

#endif /* WEFT_COLL_DIAG_FILE_H */
