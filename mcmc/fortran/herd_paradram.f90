! herd_paradram: Fortran bindings (bind(C)) of herd's ParaMonte-compatible C interface
! (herd/mcmc/paradram.h), for models written with C's calling convention: a bind(C) function
! with `integer(c_int32_t), value :: ndim`. For ParaMonte's own Fortran models (no bind(C),
! ndim by reference) use the module `paramonte` (paramonte.f90) instead.
!
! The input chooses the device as for the C API: device = 'cpu' (default), 'cpu_batched' or
! 'cuda' (the batched run, docs/batched.md), e.g. in a namelist `device = 'cpu_batched'`.
!
! run_paradram is generic: given the model itself, its signature is checked at compile time
! (herd_log_func_c); given a type(c_funptr) from c_funloc, nothing can be checked, and a model
! of another signature (e.g. ndim by reference) crashes at its first call.
module herd_paradram
  use, intrinsic :: iso_c_binding, only: c_int32_t, c_double, c_char, c_funptr, c_funloc, c_int
  implicit none
  private
  public :: run_paradram, herd_last_status, herd_log_func_c

  !> The log density in C's convention: double f(int32_t ndim, double point[]).
  abstract interface
    function herd_log_func_c(ndim, point) result(logFunc) bind(C)
      import :: c_int32_t, c_double
      integer(c_int32_t), value :: ndim
      real(c_double), intent(in) :: point(ndim)
      real(c_double) :: logFunc
    end function herd_log_func_c
  end interface

  !> status = run_paradram(ndim, getLogFunc, input): the model or its c_funloc.
  interface run_paradram
    module procedure run_paradram_model, run_paradram_funptr
  end interface run_paradram

  interface
    ! void runParaDRAM(int32_t ndim, double (*getLogFunc)(int32_t, double[]), char* inputFile, int32_t len)
    subroutine runParaDRAM_c(ndim, getLogFunc, inputFile, inputFileLen) bind(C, name="runParaDRAM")
      import :: c_int32_t, c_funptr, c_char
      integer(c_int32_t), value :: ndim
      type(c_funptr), value :: getLogFunc
      character(kind=c_char), dimension(*) :: inputFile
      integer(c_int32_t), value :: inputFileLen
    end subroutine runParaDRAM_c

    !> Status of the last run in this process: 0 done, 1 the run failed, 2 bad input.
    function herd_last_status() result(status) bind(C, name="herd_last_status")
      import :: c_int
      integer(c_int) :: status
    end function herd_last_status
  end interface

contains

  !> Runs DRAM on the bind(C) model `getLogFunc` (interface herd_log_func_c), reading the input
  !> file or namelist text `input`. Returns herd's status (0 ok, 1 run failed, 2 bad input).
  function run_paradram_model(ndim, getLogFunc, input) result(status)
    integer(c_int32_t), intent(in) :: ndim
    procedure(herd_log_func_c) :: getLogFunc
    character(len=*), intent(in) :: input
    integer :: status
    status = run_paradram_funptr(ndim, c_funloc(getLogFunc), input)
  end function run_paradram_model

  !> As run_paradram_model, for a c_funloc of a bind(C) function with herd_log_func_c's
  !> signature (unchecked: a model of another signature crashes).
  function run_paradram_funptr(ndim, getLogFunc, input) result(status)
    integer(c_int32_t), intent(in) :: ndim
    type(c_funptr), intent(in) :: getLogFunc
    character(len=*), intent(in) :: input
    integer :: status
    call runParaDRAM_c(ndim, getLogFunc, input, int(len(input), c_int32_t))
    status = herd_last_status()
  end function run_paradram_funptr

end module herd_paradram
