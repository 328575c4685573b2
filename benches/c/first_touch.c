/* What memory costs the first time it is written, against memory already
 * in use: the cost a sender log pays for every byte of a program that never
 * checkpoints (its log only grows). Not an MPI program.
 * Build: cc -O2 first_touch.c. Run: ./a.out MIB anon|thp|shm
 *   anon  anonymous memory, 4 KiB pages
 *   thp   anonymous memory with MADV_HUGEPAGE (2 MiB pages where the kernel has them)
 *   shm   a file in /dev/shm mapped MAP_SHARED (what a file sender log uses)
 * Prints the copy rate into fresh memory (and µs per KiB), then into the
 * same memory again. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <fcntl.h>
#include <unistd.h>
#include <time.h>
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
int main(int argc,char**argv){
  if(argc<3){fprintf(stderr,"usage: %s MIB anon|thp|shm\n",argv[0]);return 2;}
  size_t total = (size_t)atol(argv[1])<<20; /* MiB */
  const char*mode=argv[2];
  char *p; int fd=-1;
  if(!strcmp(mode,"shm")){fd=open("/dev/shm/fresh-test",O_RDWR|O_CREAT|O_TRUNC,0600);if(fd<0||ftruncate(fd,total)){perror("/dev/shm/fresh-test");return 1;}p=mmap(0,total,PROT_READ|PROT_WRITE,MAP_SHARED,fd,0);}
  else {p=mmap(0,total,PROT_READ|PROT_WRITE,MAP_PRIVATE|MAP_ANONYMOUS,-1,0); if(!strcmp(mode,"thp")) madvise(p,total,MADV_HUGEPAGE);}
  if(argc<3||total==0){fprintf(stderr,"usage: %s MIB anon|thp|shm\n",argv[0]);return 2;}
  if(p==MAP_FAILED){perror("mmap");return 1;}
  char *src=malloc(1<<20); memset(src,7,1<<20);
  double t0=now();
  for(size_t off=0; off<total; off+=1<<20) memcpy(p+off,src,1<<20);
  double t1=now();
  for(size_t off=0; off<total; off+=1<<20) memcpy(p+off,src,1<<20);
  double t2=now();
  printf("%s: first touch %.2f GB/s (%.3f us/KiB), warm %.2f GB/s\n",mode,total/(t1-t0)/1e9,(t1-t0)*1e6/(total/1024.0),total/(t2-t1)/1e9);
  if(fd>=0){unlink("/dev/shm/fresh-test");}
  return 0;}
