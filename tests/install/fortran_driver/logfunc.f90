! A ParaMonte 1.x Fortran model as ParaMonte's examples write it: an ordinary module function
! (no bind(C)), ndim by reference, kinds IK and RK from the paramonte module.
module LogFunc_mod
  use paramonte, only: IK, RK
  implicit none
  integer(IK), parameter :: NDIM = 2_IK
contains
  ! Normal target: means (1, -2), standard deviations (1, 3), unnormalised.
  function getLogFunc(ndim, Point) result(logFunc)
    integer(IK), intent(in) :: ndim
    real(RK), intent(in) :: Point(ndim)
    real(RK) :: logFunc
    logFunc = -0.5_RK * ((Point(1) - 1._RK)**2 + ((Point(2) + 2._RK) / 3._RK)**2)
  end function getLogFunc
end module LogFunc_mod
