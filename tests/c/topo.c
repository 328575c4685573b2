/* Groups, communicators made from groups, virtual topologies (Cartesian,
   graph, distributed graph), communicator names, info objects and
   split by type, on 4 ranks. Every check that
   fails prints "FAIL <what>" and the program exits 1; rank 0 ends with
   "topo ok <checks>". Built with `vpml mpicc` or MPICH's mpicc.mpich. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

static int size;


static int group_size(MPI_Group g) {
    int n = -1;
    MPI_Group_size(g, &n);
    return n;
}

static int group_rank(MPI_Group g) {
    int r = -2;
    MPI_Group_rank(g, &r);
    return r;
}

static void groups(void) {
    MPI_Group world, odd, not0, evens, evens2, all, both, rest, none;
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    CHECK(group_size(world) == size && group_rank(world) == rank, "Comm_group");

    int ranks31[2] = {3, 1};
    MPI_Group_incl(world, 2, ranks31, &odd);
    int want_odd = rank == 3 ? 0 : rank == 1 ? 1 : MPI_UNDEFINED;
    CHECK(group_size(odd) == 2 && group_rank(odd) == want_odd, "Group_incl rank %d", group_rank(odd));

    int rank0[1] = {0};
    MPI_Group_excl(world, 1, rank0, &not0);
    CHECK(group_size(not0) == 3 && group_rank(not0) == (rank ? rank - 1 : MPI_UNDEFINED), "Group_excl");

    int r02[1][3] = {{0, 3, 2}}, r13[1][3] = {{1, 3, 2}};
    MPI_Group_range_incl(world, 1, r02, &evens);
    MPI_Group_range_excl(world, 1, r13, &evens2);
    int cmp = -1;
    MPI_Group_compare(evens, evens2, &cmp);
    CHECK(group_size(evens) == 2 && cmp == MPI_IDENT, "Group_range_incl/excl %d", cmp);

    /* Bad ranges are errors (returned here), never a huge allocation. */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Group bad = MPI_GROUP_NULL;
    int huge[1][3] = {{0, 2147483647, 1}}, backwards[1][3] = {{1, 0, 2}};
    CHECK(MPI_Group_range_incl(world, 1, huge, &bad) != MPI_SUCCESS, "a range past the group");
    CHECK(MPI_Group_range_incl(world, 1, backwards, &bad) != MPI_SUCCESS, "a range running away from its end");
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);

    MPI_Group_union(odd, evens, &all);
    MPI_Group_compare(all, world, &cmp);
    CHECK(group_size(all) == 4 && cmp == MPI_SIMILAR, "Group_union/compare %d", cmp);
    MPI_Group_compare(world, world, &cmp);
    CHECK(cmp == MPI_IDENT, "Group_compare ident");
    MPI_Group_compare(odd, evens, &cmp);
    CHECK(cmp == MPI_UNEQUAL, "Group_compare unequal");

    MPI_Group_intersection(odd, not0, &both);
    MPI_Group_compare(both, odd, &cmp);
    CHECK(cmp == MPI_IDENT, "Group_intersection %d", cmp);
    MPI_Group_difference(world, odd, &rest);
    MPI_Group_compare(rest, evens, &cmp);
    CHECK(cmp == MPI_IDENT, "Group_difference %d", cmp);
    MPI_Group_intersection(odd, evens, &none);
    CHECK(none == MPI_GROUP_EMPTY && group_size(none) == 0, "empty intersection");

    int from[5] = {0, 1, 2, 3, MPI_PROC_NULL}, to[5];
    MPI_Group_translate_ranks(world, 5, from, odd, to);
    CHECK(to[0] == MPI_UNDEFINED && to[1] == 1 && to[2] == MPI_UNDEFINED && to[3] == 0 && to[4] == MPI_PROC_NULL,
          "Group_translate_ranks %d %d %d %d %d", to[0], to[1], to[2], to[3], to[4]);

    /* Comm_create: collective over the world; ranks 0 and 2 get a
       communicator of two. */
    MPI_Comm ce;
    MPI_Comm_create(MPI_COMM_WORLD, evens, &ce);
    if (rank % 2 == 0) {
        int r = -1, sum = 0;
        MPI_Comm_rank(ce, &r);
        MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, ce);
        CHECK(ce != MPI_COMM_NULL && r == rank / 2 && sum == 2, "Comm_create rank %d sum %d", r, sum);
        MPI_Comm_free(&ce);
    } else {
        CHECK(ce == MPI_COMM_NULL, "Comm_create outside the group");
    }

    /* Disjoint groups in one call (MPI 2.2): odd ranks pass {3, 1},
       even ones {0, 2}; each gets the communicator of its own group. */
    MPI_Comm both_halves;
    MPI_Comm_create(MPI_COMM_WORLD, rank % 2 ? odd : evens, &both_halves);
    {
        int hs = -1, hr = -1;
        MPI_Comm_size(both_halves, &hs);
        MPI_Comm_rank(both_halves, &hr);
        int want = rank % 2 ? (rank == 3 ? 0 : 1) : rank / 2;
        CHECK(hs == 2 && hr == want, "Comm_create with disjoint groups: size %d rank %d", hs, hr);
        MPI_Comm_free(&both_halves);
    }

    /* Comm_create_group: ranks 3 and 1 alone, in that order. */
    if (rank % 2 == 1) {
        MPI_Comm cg;
        MPI_Comm_create_group(MPI_COMM_WORLD, odd, 7, &cg);
        int r = -1, sum = 0;
        MPI_Comm_rank(cg, &r);
        MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, cg);
        CHECK(r == (rank == 3 ? 0 : 1) && sum == 4, "Comm_create_group rank %d sum %d", r, sum);
        MPI_Group g;
        MPI_Comm_group(cg, &g);
        MPI_Group_compare(g, odd, &cmp);
        CHECK(cmp == MPI_IDENT, "Comm_group of a created communicator %d", cmp);
        MPI_Group_free(&g);
        MPI_Comm_free(&cg);
    }

    MPI_Group *gs[] = {&world, &odd, &not0, &evens, &evens2, &all, &both, &rest, &none};
    for (unsigned i = 0; i < sizeof gs / sizeof gs[0]; i++) {
        MPI_Group_free(gs[i]);
        CHECK(*gs[i] == MPI_GROUP_NULL, "Group_free %u", i);
    }
}

static void dims(void) {
    int d2[2] = {0, 0};
    MPI_Dims_create(4, 2, d2);
    CHECK(d2[0] == 2 && d2[1] == 2, "Dims_create 4 %d %d", d2[0], d2[1]);
    int d3[3] = {0, 3, 0};
    MPI_Dims_create(12, 3, d3);
    CHECK(d3[0] == 2 && d3[1] == 3 && d3[2] == 2, "Dims_create 12 %d %d %d", d3[0], d3[1], d3[2]);
    int p[2] = {0, 0};
    MPI_Dims_create(7, 2, p);
    CHECK(p[0] == 7 && p[1] == 1, "Dims_create 7 %d %d", p[0], p[1]);
    int b[3] = {0, 0, 0};
    MPI_Dims_create(36, 3, b);
    CHECK(b[0] == 4 && b[1] == 3 && b[2] == 3, "Dims_create 36 %d %d %d", b[0], b[1], b[2]);
    /* 6 nodes do not fit a first dimension of 4: an error, returned. */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int bad[2] = {4, 0};
    CHECK(MPI_Dims_create(6, 2, bad) != MPI_SUCCESS, "Dims_create 6 on 4x?");
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
}

static void cartesian(void) {
    int status = -1;
    MPI_Topo_test(MPI_COMM_WORLD, &status);
    CHECK(status == MPI_UNDEFINED, "Topo_test world %d", status);

    int dims2[2] = {2, 2}, periods[2] = {1, 0};
    MPI_Comm cart;
    MPI_Cart_create(MPI_COMM_WORLD, 2, dims2, periods, 0, &cart);
    MPI_Topo_test(cart, &status);
    CHECK(status == MPI_CART, "Topo_test cart %d", status);
    int nd = -1;
    MPI_Cartdim_get(cart, &nd);
    CHECK(nd == 2, "Cartdim_get %d", nd);
    int d[2], p[2], c[2];
    MPI_Cart_get(cart, 2, d, p, c);
    CHECK(d[0] == 2 && d[1] == 2 && p[0] == 1 && p[1] == 0 && c[0] == rank / 2 && c[1] == rank % 2,
          "Cart_get %d %d %d %d %d %d", d[0], d[1], p[0], p[1], c[0], c[1]);
    int at[2] = {-1, 1}, r = -1;
    MPI_Cart_rank(cart, at, &r);
    CHECK(r == 3, "Cart_rank wraps the periodic dimension: %d", r);
    MPI_Cart_coords(cart, 2, 2, c);
    CHECK(c[0] == 1 && c[1] == 0, "Cart_coords %d %d", c[0], c[1]);
    int src, dst;
    MPI_Cart_shift(cart, 0, 1, &src, &dst);
    CHECK(src == (rank + 2) % 4 && dst == (rank + 2) % 4, "Cart_shift periodic %d %d", src, dst);
    MPI_Cart_shift(cart, 1, 1, &src, &dst);
    CHECK(src == (rank % 2 ? rank - 1 : MPI_PROC_NULL) && dst == (rank % 2 ? MPI_PROC_NULL : rank + 1),
          "Cart_shift open %d %d", src, dst);

    /* Rows: a 1-dimensional grid of 2 per row. */
    int remain[2] = {0, 1};
    MPI_Comm row;
    MPI_Cart_sub(cart, remain, &row);
    int rs = -1, rr = -1, rowsum = 0;
    MPI_Comm_size(row, &rs);
    MPI_Comm_rank(row, &rr);
    MPI_Allreduce(&rank, &rowsum, 1, MPI_INT, MPI_SUM, row);
    MPI_Cartdim_get(row, &nd);
    CHECK(rs == 2 && rr == rank % 2 && rowsum == (rank / 2) * 4 + 1 && nd == 1, "Cart_sub %d %d %d %d", rs, rr, rowsum, nd);

    MPI_Comm dup;
    MPI_Comm_dup(cart, &dup);
    MPI_Topo_test(dup, &status);
    CHECK(status == MPI_CART, "a duplicate keeps the topology: %d", status);

    int three[1] = {3}, open[1] = {0}, newrank = -2;
    MPI_Cart_map(MPI_COMM_WORLD, 1, three, open, &newrank);
    CHECK(newrank == (rank < 3 ? rank : MPI_UNDEFINED), "Cart_map %d", newrank);
    MPI_Comm small;
    MPI_Cart_create(MPI_COMM_WORLD, 1, three, open, 0, &small);
    CHECK((small == MPI_COMM_NULL) == (rank == 3), "Cart_create of 3 on 4");
    if (small != MPI_COMM_NULL) MPI_Comm_free(&small);

    MPI_Comm_free(&dup);
    MPI_Comm_free(&row);
    MPI_Comm_free(&cart);
}

static void graphs(void) {
    /* A ring: node i's neighbours are i-1 and i+1. */
    int index[4] = {2, 4, 6, 8}, edges[8] = {3, 1, 0, 2, 1, 3, 2, 0};
    MPI_Comm g;
    MPI_Graph_create(MPI_COMM_WORLD, 4, index, edges, 0, &g);
    int status = -1, nn = -1, ne = -1;
    MPI_Topo_test(g, &status);
    MPI_Graphdims_get(g, &nn, &ne);
    CHECK(status == MPI_GRAPH && nn == 4 && ne == 8, "Graph_create %d %d %d", status, nn, ne);
    int count = -1, nb[2] = {-1, -1};
    MPI_Graph_neighbors_count(g, 2, &count);
    MPI_Graph_neighbors(g, 2, 2, nb);
    CHECK(count == 2 && nb[0] == 1 && nb[1] == 3, "Graph_neighbors %d %d %d", count, nb[0], nb[1]);
    int gi[4], ge[8];
    MPI_Graph_get(g, 4, 8, gi, ge);
    CHECK(memcmp(gi, index, sizeof index) == 0 && memcmp(ge, edges, sizeof edges) == 0, "Graph_get");
    int newrank = -2;
    MPI_Graph_map(MPI_COMM_WORLD, 4, index, edges, &newrank);
    CHECK(newrank == rank, "Graph_map %d", newrank);
    MPI_Comm_free(&g);

    /* Each rank names its own edges: from the left, to the right, weighted. */
    int left = (rank + 3) % 4, right = (rank + 1) % 4, wl = 10 + rank, wr = 20 + rank;
    MPI_Comm adj;
    MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, 1, &left, &wl, 1, &right, &wr, MPI_INFO_NULL, 0, &adj);
    int in = -1, out = -1, weighted = -1;
    MPI_Topo_test(adj, &status);
    MPI_Dist_graph_neighbors_count(adj, &in, &out, &weighted);
    CHECK(status == MPI_DIST_GRAPH && in == 1 && out == 1 && weighted == 1, "Dist_graph_create_adjacent %d %d %d %d",
          status, in, out, weighted);
    int s = -1, sw = -1, t = -1, tw = -1;
    MPI_Dist_graph_neighbors(adj, 1, &s, &sw, 1, &t, &tw);
    CHECK(s == left && sw == wl && t == right && tw == wr, "Dist_graph_neighbors %d %d %d %d", s, sw, t, tw);
    MPI_Comm_free(&adj);

    /* Rank 0 names the whole ring, unweighted; everyone learns its part. */
    int srcs[4] = {0, 1, 2, 3}, degs[4] = {1, 1, 1, 1}, dsts[4] = {1, 2, 3, 0};
    MPI_Comm dg;
    MPI_Dist_graph_create(MPI_COMM_WORLD, rank == 0 ? 4 : 0, srcs, degs, dsts, MPI_UNWEIGHTED, MPI_INFO_NULL, 0, &dg);
    MPI_Dist_graph_neighbors_count(dg, &in, &out, &weighted);
    CHECK(in == 1 && out == 1 && weighted == 0, "Dist_graph_create %d %d %d", in, out, weighted);
    MPI_Dist_graph_neighbors(dg, 1, &s, MPI_UNWEIGHTED, 1, &t, MPI_UNWEIGHTED);
    CHECK(s == left && t == right, "Dist_graph_create neighbours %d %d", s, t);
    MPI_Comm_free(&dg);
}

static void names_and_info(void) {
    char name[MPI_MAX_OBJECT_NAME];
    int len = -1;
    MPI_Comm_get_name(MPI_COMM_WORLD, name, &len);
    CHECK(strcmp(name, "MPI_COMM_WORLD") == 0 && len == 14, "Comm_get_name world %s %d", name, len);

    MPI_Info info, copy;
    MPI_Info_create(&info);
    MPI_Info_set(info, "alpha", "1");
    MPI_Info_set(info, "beta", "two");
    MPI_Info_set(info, "alpha", "three");
    int n = -1, flag = -1, vlen = -1;
    MPI_Info_get_nkeys(info, &n);
    char key[MPI_MAX_INFO_KEY + 1], value[MPI_MAX_INFO_VAL + 1];
    MPI_Info_get_nthkey(info, 0, key);
    MPI_Info_get(info, "alpha", MPI_MAX_INFO_VAL, value, &flag);
    CHECK(n == 2 && strcmp(key, "alpha") == 0 && flag == 1 && strcmp(value, "three") == 0,
          "Info_set/get %d %s %d %s", n, key, flag, value);
    MPI_Info_get_valuelen(info, "beta", &vlen, &flag);
    CHECK(flag == 1 && vlen == 3, "Info_get_valuelen %d %d", flag, vlen);
    int buflen = 2;
    MPI_Info_get_string(info, "beta", &buflen, value, &flag);
    CHECK(flag == 1 && buflen == 4 && strcmp(value, "t") == 0, "Info_get_string %d %d %s", flag, buflen, value);
    MPI_Info_dup(info, &copy);
    MPI_Info_delete(info, "beta");
    MPI_Info_get_nkeys(info, &n);
    MPI_Info_get(info, "beta", MPI_MAX_INFO_VAL, value, &flag);
    CHECK(n == 1 && flag == 0, "Info_delete %d %d", n, flag);
    MPI_Info_get_nkeys(copy, &n);
    CHECK(n == 2, "Info_dup keeps both keys: %d", n);

    MPI_Comm named, used;
    MPI_Comm_dup_with_info(MPI_COMM_WORLD, info, &named);
    MPI_Comm_set_name(named, "solver");
    MPI_Comm_get_name(named, name, &len);
    CHECK(strcmp(name, "solver") == 0 && len == 6, "Comm_set_name %s %d", name, len);
    MPI_Comm_dup(named, &used);
    MPI_Comm_get_name(used, name, &len);
    CHECK(len == 0, "a duplicate has no name: %s", name);
    MPI_Info got;
    MPI_Comm_set_info(named, info);
    MPI_Comm_get_info(named, &got);
    CHECK(got != MPI_INFO_NULL, "Comm_get_info");
    MPI_Info_free(&got);
    MPI_Info_free(&copy);
    MPI_Info_free(&info);
    CHECK(info == MPI_INFO_NULL && copy == MPI_INFO_NULL, "Info_free");
    MPI_Comm_free(&used);
    MPI_Comm_free(&named);

    /* Every rank of this test runs on one host. */
    MPI_Comm node, none;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, -rank, MPI_INFO_NULL, &node);
    int ns = -1, nr = -1;
    MPI_Comm_size(node, &ns);
    MPI_Comm_rank(node, &nr);
    CHECK(ns == size && nr == size - 1 - rank, "Comm_split_type shared %d %d", ns, nr);
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_UNDEFINED, 0, MPI_INFO_NULL, &none);
    CHECK(none == MPI_COMM_NULL, "Comm_split_type undefined");
    MPI_Comm_free(&node);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size != 4) {
        if (rank == 0) printf("FAIL: run on 4 ranks\n");
        MPI_Finalize();
        return 1;
    }
    groups();
    dims();
    cartesian();
    graphs();
    names_and_info();
    int all_failed = 0;
    MPI_Allreduce(&failed, &all_failed, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0 && all_failed == 0) printf("topo ok %d\n", checks);
    MPI_Finalize();
    return all_failed ? 1 : 0;
}
