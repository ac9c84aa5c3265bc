/* `pipenet inspect A --compare B`: whether two files hold the same numbers
 * (inspect_compare.c says how they are compared). */
#ifndef PN_INSPECT_COMPARE_H
#define PN_INSPECT_COMPARE_H

/* Compares path_a with path_b, printing each array that differs and a summary
 * line; *differing counts them. Fails (negative) when a file cannot be read or the
 * two are of different kinds. */
int pn_inspect_compare(const char *path_a, const char *path_b, double tolerance, int *differing);

#endif
