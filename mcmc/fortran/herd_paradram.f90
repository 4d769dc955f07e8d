! herd_paradram: Fortran bindings (bind(C)) of herd's ParaMonte-compatible C interface
! (herd/mcmc/paradram.h). The log function has ParaMonte's C signature.
module herd_paradram
  use, intrinsic :: iso_c_binding, only: c_int32_t, c_double, c_char, c_funptr, c_int
  implicit none
  private
  public :: run_paradram, herd_last_status

  interface
    ! void runParaDRAM(int32_t ndim, double (*getLogFunc)(int32_t, double[]), char* inputFile, int32_t len)
    subroutine runParaDRAM_c(ndim, getLogFunc, inputFile, inputFileLen) bind(C, name="runParaDRAM")
      import :: c_int32_t, c_funptr, c_char
      integer(c_int32_t), value :: ndim
      type(c_funptr), value :: getLogFunc
      character(kind=c_char), dimension(*) :: inputFile
      integer(c_int32_t), value :: inputFileLen
    end subroutine runParaDRAM_c

    ! int herd_last_status(void)
    function herd_last_status() result(status) bind(C, name="herd_last_status")
      import :: c_int
      integer(c_int) :: status
    end function herd_last_status
  end interface

contains

  !> Runs DRAM on `getLogFunc` (a bind(C) function: real(c_double) function f(ndim, point),
  !> with `integer(c_int32_t), value :: ndim` and `real(c_double) :: point(ndim)`), reading
  !> the input file or namelist text `input`. Returns herd's status (0 ok, 1 run failed,
  !> 2 bad input).
  function run_paradram(ndim, getLogFunc, input) result(status)
    integer(c_int32_t), intent(in) :: ndim
    type(c_funptr), intent(in) :: getLogFunc
    character(len=*), intent(in) :: input
    integer :: status
    call runParaDRAM_c(ndim, getLogFunc, input, int(len(input), c_int32_t))
    status = herd_last_status()
  end function run_paradram

end module herd_paradram
